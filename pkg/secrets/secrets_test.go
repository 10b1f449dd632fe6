package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"gantry.dev/gantry/pkg/statedir"
)

func TestMaterializeMakesAPrivateCopyThatOpenSweeps(t *testing.T) {
	d, s := openStore(t)
	if err := s.Create("token", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	dir, cleanup, err := s.Materialize("fn-1", []string{"token"})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(dir)
	fst, _ := os.Stat(filepath.Join(dir, "token"))
	if st.Mode().Perm() != 0o700 || fst.Mode().Perm() != 0o400 {
		t.Fatalf("modes %v %v, want 0700 and 0400", st.Mode(), fst.Mode())
	}
	if names, _ := s.List(); len(names) != 1 || names[0] != "token" {
		t.Fatalf("the copies' folder is listed: %v", names)
	}
	if _, _, err := s.Materialize("fn-2", []string{"token", "absent"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing secret: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(d.Sub(statedir.Secrets), RunDir, "fn-2*")); len(left) != 0 {
		t.Fatalf("a failed copy left %v", left)
	}
	// A crash leaves the copy; the next Open removes it.
	_ = cleanup
	if _, err := Open(d); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a crashed gateway's copy survived Open: %v", err)
	}
}

func TestNamesAreCheckedBeforeAnyFileIsTouched(t *testing.T) {
	_, s := openStore(t)
	for _, name := range []string{"", "../lock", ".run", "a/b", "UPPER", "a..b", "-a", string(make([]byte, 300))} {
		if err := s.Create(name, []byte("x")); !errors.Is(err, ErrInvalid) {
			t.Errorf("Create(%q): %v, want ErrInvalid", name, err)
		}
		if _, err := s.Get(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("Get(%q): %v, want ErrInvalid", name, err)
		}
	}
	if err := s.Create("big", make([]byte, MaxValue+1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a value past the bound: %v", err)
	}
	if err := s.Delete("absent"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete absent: %v", err)
	}
}

// An update reaches the copies of the instances running now, as Kubernetes
// updates a running pod's secret volume; a stopped instance's folder is
// not made again, and an instance that does not name the secret gets
// nothing.
func TestUpdateReachesTheRunningInstancesCopies(t *testing.T) {
	_, s := openStore(t)
	for _, n := range []string{"db", "other"} {
		if err := s.Create(n, []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	running, stopRunning, err := s.Materialize("fn-1", []string{"db"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopRunning()
	unrelated, stopUnrelated, err := s.Materialize("fn-2", []string{"other"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopUnrelated()
	stopped, stop, err := s.Materialize("fn-3", []string{"db"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if err := s.Update("db", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(running, "db"))
	st, _ := os.Stat(filepath.Join(running, "db"))
	if err != nil || string(b) != "v2" || st.Mode().Perm() != 0o400 {
		t.Fatalf("the running instance's copy: %q %v, mode %v; want v2, 0400", b, err, st.Mode())
	}
	if _, err := os.Stat(filepath.Join(unrelated, "db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an instance not naming db got it: %v", err)
	}
	if _, err := os.Stat(stopped); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stopped instance's folder was made again: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(unrelated, "other")); string(b) != "v1" {
		t.Fatalf("other: %q, want v1", b)
	}
}

// openStore opens a store in a state folder of the test's own, closed when
// the test ends.
func openStore(t *testing.T) (*statedir.Dir, *Store) {
	t.Helper()
	d, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}
