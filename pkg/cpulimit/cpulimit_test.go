package cpulimit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// open opens a controller or skips, saying why this machine has none.
func open(t *testing.T) *Controller {
	t.Helper()
	c, err := Open()
	if err != nil {
		t.Skipf("no cgroup to enforce CPU limits with here: %v", err)
	}
	return c
}

// TestOpenRemovesDeadGatewaysGroups plants the directory a killed gateway
// would leave and checks that the next Open removes it, and that Close
// leaves nothing.
func TestOpenRemovesDeadGatewaysGroups(t *testing.T) {
	c := open(t)
	parent := filepath.Dir(c.Dir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, Prefix+itoa(dead.Process.Pid)+"-1")
	if err := os.MkdirAll(filepath.Join(stale, "fn-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeTree(stale) })
	c2, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dead gateway's group stays: %v", err)
	}
	if _, err := os.Stat(c.Dir()); err != nil {
		t.Errorf("a live gateway's group was removed: %v", err)
	}
	for _, c := range []*Controller{c, c2} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Close leaves %s: %v", c.Dir(), err)
		}
	}
}

func TestOwnerPID(t *testing.T) {
	for name, want := range map[string]int{"gantry-12-3": 12, "gantry-12": 0, "gantry-x-1": 0, "other-12-1": 0, "gantry-0-1": 0} {
		if got, _ := ownerPID(name); got != want {
			t.Errorf("ownerPID(%q) = %d, want %d", name, got, want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
