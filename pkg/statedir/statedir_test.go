package statedir

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOpenMakesTheLayoutAndLocks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	d, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{Functions, Secrets, Instances, JetStream, Logs} {
		if st, err := os.Stat(d.Sub(sub)); err != nil || !st.IsDir() {
			t.Fatalf("%s: %v", sub, err)
		}
	}
	if st, _ := os.Stat(d.Sub(Secrets)); st.Mode().Perm() != 0o700 {
		t.Fatalf("secrets mode %v", st.Mode().Perm())
	}
	// flock locks belong to the open file, so a second Open in this process
	// is refused too, as a second gateway would be.
	_, err = Open(p)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second open: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(p)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	d2.Close()
}

// A lock held by another process is refused, naming it, and released when
// that process dies, however it dies.
func TestLockHeldByAnotherProcess(t *testing.T) {
	if p := os.Getenv("GANTRY_STATEDIR_HOLD"); p != "" {
		if _, err := Open(p); err != nil {
			os.Exit(3)
		}
		os.Stdout.Write([]byte("held\n"))
		select {}
	}
	p := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLockHeldByAnotherProcess$")
	cmd.Env = append(os.Environ(), "GANTRY_STATEDIR_HOLD="+p)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child: %q %v", buf, err)
	}
	_, err := Open(p)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "PID "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("open beside the holder: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	d, err := Open(p)
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	d.Close()
}

func TestDefaultFollowsTheAddress(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x")
	got, err := Default("127.0.0.1:8080")
	if err != nil || got != "/x/gantry/127.0.0.1_8080" {
		t.Fatalf("got %q, %v", got, err)
	}
	got, _ = Default("[::1]:9")
	if got != "/x/gantry/__1_9" {
		t.Fatalf("ipv6: %q", got)
	}
	if _, err := Default("nonsense"); err == nil {
		t.Fatal("no error for an address without a port")
	}
}

func TestWriteFileReplacesWhole(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "two" || st.Mode().Perm() != 0o600 {
		t.Fatalf("%q %v", b, st.Mode())
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".f.tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestTempIsRemoved(t *testing.T) {
	d, err := Temp()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path()); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
}
