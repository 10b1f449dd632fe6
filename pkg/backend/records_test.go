package backend

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/childproc"
)

// startGroup starts a sleep leading a process group of its own, as the
// runtime starts an instance, but not as this process's child's child:
// the test waits for it so that a kill is seen.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

func writeRecord(t *testing.T, dir string, r record) {
	t.Helper()
	b, _ := json.Marshal(r)
	if err := os.WriteFile(filepath.Join(dir, r.ID+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func exitsWithin(cmd *exec.Cmd, d time.Duration) bool {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// A restarted gateway stops the instance a crashed one recorded, and
// leaves alone a process whose PID matches a record but whose start time
// does not (the PID was reused).
func TestKeepRecordsStopsLeftoversCheckingStartTime(t *testing.T) {
	dir := t.TempDir()
	left, reused := startGroup(t), startGroup(t)
	st, err := childproc.StartTime(left.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	rst, _ := childproc.StartTime(reused.Process.Pid)
	writeRecord(t, dir, record{ID: "f-1", Function: "f", PID: left.Process.Pid, PGID: left.Process.Pid, StartTime: st})
	writeRecord(t, dir, record{ID: "g-1", Function: "g", PID: reused.Process.Pid, PGID: reused.Process.Pid, StartTime: rst - 1})
	l := NewLocal(LocalConfig{})
	n, err := l.KeepRecords(dir)
	if err != nil || n != 1 {
		t.Fatalf("KeepRecords = %d, %v; want 1 process stopped", n, err)
	}
	if !exitsWithin(left, 10*time.Second) {
		t.Fatal("the recorded instance is still running")
	}
	if !childproc.Alive(reused.Process.Pid) {
		t.Fatal("a process whose start time differs from the record was signalled")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("records left after reaping: %v", entries)
	}
}

// Running instances are recorded with their PID and start time, and the
// record goes when the instance does.
func TestRunningInstancesAreRecorded(t *testing.T) {
	dir := t.TempDir()
	l, rec := newTestLocal(t, LocalConfig{})
	if _, err := l.KeepRecords(dir); err != nil {
		t.Fatal(err)
	}
	if err := l.Deploy(context.Background(), instanceFn(t, "echo", "serve")); err != nil {
		t.Fatal(err)
	}
	l.Start("echo", 1)
	if e := rec.next(t); e != "ready" {
		t.Fatalf("event %q", e)
	}
	b, err := os.ReadFile(filepath.Join(dir, rec.ready[0].ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if st, err := childproc.StartTime(r.PID); err != nil || st != r.StartTime || r.PGID != r.PID {
		t.Fatalf("record %+v does not name the running instance (start time %d, %v)", r, st, err)
	}
	l.Stop(rec.ready[0])
	if e := rec.next(t); e != "exited" {
		t.Fatalf("event %q", e)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("records left after the instance stopped: %v", entries)
	}
}

// A line of plain words is exec'd without a shell; a line that needs one
// runs under sh -c, prefixed by exec when it is one simple command.
func TestCommandLinesExecWithoutAShellWhereTheyCan(t *testing.T) {
	l := NewLocal(LocalConfig{Self: "/bin/true"})
	cases := []struct {
		line string
		want []string
	}{
		{"sleep 5", []string{"sleep", "5"}},
		{"gantry fn sentiment", []string{"/bin/true", "fn", "sentiment"}},
		{"'sleep'  '1 2'", []string{"sleep", "1 2"}},
		{"sleep $DELAY", []string{"/bin/sh", "-c", "exec sleep $DELAY"}},
		{"A=1 sleep 5", []string{"/bin/sh", "-c", "A=1 sleep 5"}},
		{"sleep 1 && sleep 2", []string{"/bin/sh", "-c", "sleep 1 && sleep 2"}},
		{"set -e", []string{"/bin/sh", "-c", "set -e"}},
		{"gantry fn x > /dev/null", []string{"/bin/sh", "-c", "'/bin/true' fn x > /dev/null"}},
	}
	for _, c := range cases {
		got := l.commandFor(c.line).Args
		if len(got) != len(c.want) {
			t.Errorf("%q runs %q, want %q", c.line, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q runs %q, want %q", c.line, got, c.want)
				break
			}
		}
	}
}
