// Package cpulimit holds local instances to their CPU limit with cgroups
// the gateway creates and owns: one directory per gateway
// (gantry-<pid>-<n>, beside the gateway's own cgroup) and one per instance
// under it, with a CFS quota (cgroup v1's cpu.cfs_quota_us, or cgroup v2's
// cpu.max where the cpu controller can be enabled for the gateway's
// subtree). The kernel then throttles the instance's whole process tree,
// since children stay in their parent's group. A cgroup the project did
// not create is never written, except to enable the cpu controller for
// the children of the gateway's own v2 group.
package cpulimit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Period is the CFS period every group uses, in microseconds (the
// kernel's default).
const Period = 100000

// minQuota is the kernel's smallest quota, in microseconds.
const minQuota = 1000

// removeWait bounds how long Remove waits for a killed leftover to leave
// its group.
const removeWait = 3 * time.Second

// Prefix starts every directory this package creates.
const Prefix = "gantry-"

var seq atomic.Int64

// Controller is one gateway's cgroup directory.
type Controller struct {
	dir string
	v2  bool

	mu     sync.Mutex
	groups map[string]*Group
	closed bool
}

// Group is one instance's cgroup.
type Group struct {
	c   *Controller
	id  string
	dir string
}

// Open finds a cpu controller this process may write, removes the groups
// that gateways which no longer run left behind, and creates this
// gateway's directory. The error says why CPU limits cannot be enforced.
func Open() (*Controller, error) {
	parent, v2, err := findParent()
	if err != nil {
		return nil, err
	}
	cleanStale(parent)
	dir := filepath.Join(parent, fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), seq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	c := &Controller{dir: dir, v2: v2, groups: map[string]*Group{}}
	if v2 {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			_ = os.Remove(dir)
			return nil, fmt.Errorf("enable the cpu controller in %s: %w", dir, err)
		}
	}
	return c, nil
}

// Dir is the gateway's directory.
func (c *Controller) Dir() string { return c.dir }

// Place creates instance id's group with a quota of millis thousandths of
// a CPU and moves pid and every member of its process group into it.
func (c *Controller) Place(id string, millis int64, pid int) (*Group, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return nil, fmt.Errorf("instance id %q cannot name a cgroup", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("cpu limits are closed")
	}
	g := &Group{c: c, id: id, dir: filepath.Join(c.dir, id)}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if err := g.setQuota(millis); err != nil {
		_ = os.Remove(g.dir)
		return nil, err
	}
	if err := g.move(pid); err != nil {
		_ = os.Remove(g.dir)
		return nil, err
	}
	c.groups[id] = g
	return g, nil
}

func (g *Group) setQuota(millis int64) error {
	quota := millis * Period / 1000
	if quota < minQuota {
		quota = minQuota
	}
	if g.c.v2 {
		return os.WriteFile(filepath.Join(g.dir, "cpu.max"), []byte(fmt.Sprintf("%d %d", quota, Period)), 0)
	}
	if err := os.WriteFile(filepath.Join(g.dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(Period)), 0); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(g.dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(quota, 10)), 0)
}

// move puts pid in the group, then whatever its process group forked
// before it got there.
func (g *Group) move(pid int) error {
	procs := filepath.Join(g.dir, "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move process %d into %s: %w", pid, g.dir, err)
	}
	for _, p := range groupMembers(pid) {
		if p != pid {
			_ = os.WriteFile(procs, []byte(strconv.Itoa(p)), 0) // it may have exited
		}
	}
	return nil
}

// Dir is the instance's group directory.
func (g *Group) Dir() string { return g.dir }

// Stat reads the group's cpu.stat (nr_throttled, throttled_time or
// throttled_usec, ...).
func (g *Group) Stat() (map[string]int64, error) { return readStat(filepath.Join(g.dir, "cpu.stat")) }

// Remove kills what is left in the group (the instance has ended) and
// deletes it; the gateway's directory too when it is closed and this was
// its last group.
func (g *Group) Remove() error {
	g.c.mu.Lock()
	delete(g.c.groups, g.id)
	last := g.c.closed && len(g.c.groups) == 0
	g.c.mu.Unlock()
	err := removeGroup(g.dir)
	if last {
		err = errors.Join(err, removeTree(g.c.dir))
	}
	return err
}

// Close refuses new groups and removes the gateway's directory, now if no
// instance has a group, else once the last one is removed: instances
// still stopping keep their limit until they end.
func (c *Controller) Close() error {
	c.mu.Lock()
	c.closed = true
	empty := len(c.groups) == 0
	c.mu.Unlock()
	if !empty {
		return nil
	}
	return removeTree(c.dir)
}

// removeGroup SIGKILLs the group's processes and removes the directory
// once the kernel has let them go.
func removeGroup(dir string) error {
	deadline := time.Now().Add(removeWait)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup: %w", err)
		}
		for _, p := range readPIDs(filepath.Join(dir, "cgroup.procs")) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeTree removes a gateway directory's instance groups, then it.
func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			errs = append(errs, removeGroup(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(append(errs, removeGroup(dir))...)
}

// cleanStale removes the directories of gateways whose process is gone (a
// killed gateway cannot remove its own).
func cleanStale(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, ok := ownerPID(e.Name())
		if !ok || !e.IsDir() || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = removeTree(filepath.Join(parent, e.Name()))
	}
}

// ownerPID parses gantry-<pid>-<n>.
func ownerPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return 0, false
	}
	p, n, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	if _, err2 := strconv.Atoi(n); err != nil || err2 != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func readPIDs(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var ps []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func readStat(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				m[k] = n
			}
		}
	}
	return m, nil
}

// groupMembers lists the processes whose process group is pgid.
func groupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var ps []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state ppid pgrp.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) {
			ps = append(ps, pid)
		}
	}
	return ps
}

// findParent is the directory to create the gateway's in: the gateway's
// own group in a cgroup v2 hierarchy with the cpu controller available,
// else in cgroup v1's cpu hierarchy.
func findParent() (dir string, v2 bool, err error) {
	if os.Geteuid() != 0 {
		return "", false, errors.New("the gateway does not run as root, and cgroups are root's to create here")
	}
	own, err := ownGroups()
	if err != nil {
		return "", false, err
	}
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	defer mounts.Close()
	var v1 string
	var reasons []string
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		root, point, fstype := f[3], unescape(f[4]), g[0]
		switch {
		case fstype == "cgroup2":
			d := filepath.Join(point, strings.TrimPrefix(own[""], root))
			ctl, _ := os.ReadFile(filepath.Join(d, "cgroup.controllers"))
			if !hasWord(string(ctl), "cpu") {
				reasons = append(reasons, fmt.Sprintf("cgroup v2 at %s has no cpu controller", point))
				continue
			}
			if writable(d) {
				return d, true, nil
			}
			reasons = append(reasons, fmt.Sprintf("cgroup v2 group %s is not writable", d))
		case fstype == "cgroup" && hasWord(strings.ReplaceAll(g[2], ",", " "), "cpu") && v1 == "":
			d := filepath.Join(point, strings.TrimPrefix(own["cpu"], root))
			if writable(d) {
				v1 = d
			} else {
				reasons = append(reasons, fmt.Sprintf("cgroup v1 cpu group %s is not writable", d))
			}
		}
	}
	if v1 != "" {
		return v1, false, nil
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "no cgroup cpu controller is mounted")
	}
	return "", false, errors.New(strings.Join(reasons, "; "))
}

// ownGroups maps each v1 controller (and "" for v2) to this process's
// group path.
func ownGroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			m[""] = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m, nil
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

func writable(dir string) bool { return syscall.Access(dir, 2 /* W_OK */) == nil }

// unescape undoes mountinfo's octal escapes (a space is \040).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
