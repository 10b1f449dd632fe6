package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"gantry.dev/gantry/pkg/statedir"
)

func TestMaterializeMakesAPrivateCopyThatOpenSweeps(t *testing.T) {
	d, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
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
	d, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, _ := Open(d)
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
