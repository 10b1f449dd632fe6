package cpulimit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// The kubelet's shares (MilliCPUToShares) and runc's map of shares to
// cgroup v2's weight, at the points both projects pin: the bounds, one CPU
// at the defaults (1024 shares, weight 100).
func TestSharesAndWeightAsTheKubeletAndRuncCompute(t *testing.T) {
	for millis, want := range map[int64]int64{1: 2, 2: 2, 100: 102, 250: 256, 1000: 1024, 2000: 2048, 300000: 262144} {
		if got := SharesFromMillis(millis); got != want {
			t.Errorf("SharesFromMillis(%d) = %d, want %d", millis, got, want)
		}
	}
	for shares, want := range map[int64]int64{2: 1, 1024: 100, 262144: 10000, 1: 1, 300000: 10000} {
		if got := WeightFromShares(shares); got != want {
			t.Errorf("WeightFromShares(%d) = %d, want %d", shares, got, want)
		}
	}
	prev := int64(0)
	for s := int64(2); s <= 262144; s++ {
		w := WeightFromShares(s)
		if w < prev || w < 1 || w > 10000 {
			t.Fatalf("WeightFromShares(%d) = %d after %d: not monotonic within [1, 10000]", s, w, prev)
		}
		prev = w
	}
}

// TestPlaceWritesRequestsAndLimitsOnARealCgroup places a sleeping process
// with a CPU limit, a CPU request and a memory request, and reads back the
// files the kernel keeps: the values, the process in each group, the
// gateway directory's shares as the sum of its instances' requests, and
// nothing left after Remove and Close.
func TestPlaceWritesRequestsAndLimitsOnARealCgroup(t *testing.T) {
	c := open(t)
	defer func() { _ = c.Close() }()
	for _, kind := range []string{CPU, Memory} {
		if err := c.Supports(kind); err != nil {
			t.Skipf("no cgroup with the %s controller here: %v", kind, err)
		}
	}
	sleeper := func() int {
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	res := Resources{CPULimitMillis: 500, CPURequestMillis: 250, MemoryRequestBytes: 64 << 20}
	pid := sleeper()
	g, err := c.Place("fn-1", res, pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Dirs()) == 0 {
		t.Fatal("no group directory")
	}
	v2 := fileExists(filepath.Join(g.Dir(), "cpu.weight"))
	want := map[string]string{"cpu.shares": "256", "cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000", "memory.soft_limit_in_bytes": "67108864"}
	if v2 {
		want = map[string]string{"cpu.weight": itoa(int(WeightFromShares(256))), "cpu.max": "50000 100000", "memory.min": "67108864"}
	}
	for file, v := range want {
		if got := readInGroup(t, g, file); got != v {
			t.Errorf("%s = %q, want %q", file, got, v)
		}
	}
	for _, d := range g.Dirs() {
		if procs := readPIDs(filepath.Join(d, "cgroup.procs")); len(procs) != 1 || procs[0] != pid {
			t.Errorf("%s/cgroup.procs = %v, want [%d]", d, procs, pid)
		}
	}
	sharesFile := filepath.Join(c.Dir(), "cpu.shares")
	if !v2 {
		if got := readTrim(t, sharesFile); got != "1024" {
			t.Errorf("gateway directory's cpu.shares = %s with one 256-share instance, want the default 1024", got)
		}
	}
	g2, err := c.Place("fn-2", Resources{CPURequestMillis: 2000}, sleeper())
	if err != nil {
		t.Fatal(err)
	}
	if !v2 {
		if got := readTrim(t, sharesFile); got != "2304" {
			t.Errorf("gateway directory's cpu.shares = %s, want 256+2048 = 2304", got)
		}
	}
	if len(g2.Dirs()) != 1 {
		t.Errorf("a CPU request alone made groups %v, want one (no memory group)", g2.Dirs())
	}
	for _, gr := range []*Group{g, g2} {
		if err := gr.Remove(); err != nil {
			t.Fatal(err)
		}
		for _, d := range gr.Dirs() {
			if fileExists(d) {
				t.Errorf("Remove leaves %s", d)
			}
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Dirs() {
		if fileExists(d) {
			t.Errorf("Close leaves %s", d)
		}
	}
}

// readInGroup reads file from whichever of g's directories has it.
func readInGroup(t *testing.T, g *Group, file string) string {
	t.Helper()
	for _, d := range g.Dirs() {
		if p := filepath.Join(d, file); fileExists(p) {
			return readTrim(t, p)
		}
	}
	t.Fatalf("no %s in %v", file, g.Dirs())
	return ""
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
