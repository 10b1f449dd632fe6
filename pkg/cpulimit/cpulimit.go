// Package cpulimit holds local instances to their CPU limit, CPU request
// and memory request with cgroups the gateway creates and owns: one
// directory per gateway and hierarchy (gantry-<pid>-<n>, beside the
// gateway's own cgroup) and one per instance under it. A CPU limit is a
// CFS quota (cgroup v2's cpu.max, v1's cpu.cfs_quota_us); a CPU request
// is a weight, computed as the kubelet computes a container's (cpu.shares
// = millicores*1024/1000, at least 2; on v2 the shares mapped to
// cpu.weight as runc maps them); a memory request is memory.min on v2, as
// the kubelet's MemoryQoS sets it, and memory.soft_limit_in_bytes on v1,
// which has no memory.min (Resources says why). The kernel applies them to
// the instance's whole process tree, since children stay in their
// parent's group. A cgroup the project did not create is never written,
// except to enable controllers for the children of the gateway's own v2
// group.
package cpulimit

import (
	"bufio"
	"errors"
	"fmt"
	"math"
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

// The kubelet's CPU shares: 1024 a CPU, 2 to 262144 (the kernel's bounds).
const (
	sharesPerCPU  = 1024
	minShares     = 2
	maxShares     = 262144
	defaultShares = 1024 // a group's shares until written (cgroup v2: weight 100)
)

// removeWait bounds how long Remove waits for a killed leftover to leave
// its group.
const removeWait = 3 * time.Second

// Prefix starts every directory this package creates.
const Prefix = "gantry-"

// The controllers this package writes.
const (
	CPU    = "cpu"
	Memory = "memory"
)

var seq atomic.Int64

// Resources is what one instance's group holds it to; a zero field is
// unset.
type Resources struct {
	CPULimitMillis   int64 // a CFS quota: hard, throttled past it
	CPURequestMillis int64 // a weight: the instance's share of contended CPU
	// MemoryRequestBytes is protection from reclaim: memory.min on
	// cgroup v2 (never reclaimed below it, as the kubelet's MemoryQoS
	// sets a container's request; memory.low would be best effort).
	// cgroup v1 has neither; its memory.soft_limit_in_bytes, which runc
	// sets for a memory reservation, makes the kernel reclaim from the
	// groups above their soft limit first when memory runs short.
	MemoryRequestBytes int64
}

func (r Resources) uses(kind string) bool {
	switch kind {
	case CPU:
		return r.CPULimitMillis > 0 || r.CPURequestMillis > 0
	case Memory:
		return r.MemoryRequestBytes > 0
	}
	return false
}

// IsZero says r sets nothing.
func (r Resources) IsZero() bool { return r == Resources{} }

// SharesFromMillis is the kubelet's cpu.shares for a CPU request of
// millis thousandths of a CPU.
func SharesFromMillis(millis int64) int64 {
	shares := millis * sharesPerCPU / 1000
	return min(max(shares, minShares), maxShares)
}

// WeightFromShares maps cgroup v1 shares [2, 262144] to cgroup v2's
// cpu.weight [1, 10000] as runc and crun do since Kubernetes issue
// 131216: a quadratic in log2(shares) through the minimum, the maximum and
// the defaults (1024 -> 100), where the older linear map gave a one-CPU
// request weight 39, less than an unlimited process's 100.
func WeightFromShares(shares int64) int64 {
	switch {
	case shares <= minShares:
		return 1
	case shares >= maxShares:
		return 10000
	}
	l := math.Log2(float64(shares))
	return int64(math.Ceil(math.Pow(10, (l*l+125*l)/612.0-7.0/34.0)))
}

// hierarchy is the gateway's directory in one cgroup hierarchy.
type hierarchy struct {
	dir   string
	v2    bool
	kinds []string
}

func (h *hierarchy) holds(kind string) bool {
	for _, k := range h.kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Controller is one gateway's cgroup directories.
type Controller struct {
	hier    []*hierarchy
	missing map[string]error // why a controller has no directory here

	mu     sync.Mutex
	groups map[string]*Group
	closed bool
}

// Group is one instance's cgroup (a directory in each hierarchy it uses).
type Group struct {
	c      *Controller
	id     string
	dirs   []string
	cpuDir string
	shares int64 // its CPU request's shares, 0 for none
}

// Open finds the cpu and memory controllers this process may write,
// removes the groups that gateways which no longer run left behind, and
// creates this gateway's directories. The error says why no controller
// can be used; Supports says it for one.
func Open() (*Controller, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the gateway does not run as root, and cgroups are root's to create here")
	}
	own, err := ownGroups()
	if err != nil {
		return nil, err
	}
	c := &Controller{missing: map[string]error{}, groups: map[string]*Group{}}
	byParent := map[string]*hierarchy{}
	for _, kind := range []string{CPU, Memory} {
		parent, v2, err := findParent(kind, own)
		if err != nil {
			c.missing[kind] = err
			continue
		}
		h := byParent[parent]
		if h == nil {
			h = &hierarchy{dir: parent, v2: v2}
			byParent[parent] = h
			c.hier = append(c.hier, h)
		}
		h.kinds = append(h.kinds, kind)
	}
	kept := c.hier[:0]
	for _, h := range c.hier {
		if err := c.create(h); err == nil {
			kept = append(kept, h)
		}
	}
	c.hier = kept
	if len(c.hier) == 0 {
		return nil, errors.Join(c.missing[CPU], c.missing[Memory])
	}
	return c, nil
}

// create makes the gateway's directory in h's hierarchy (enabling h's
// controllers for its children on v2); a controller that cannot be
// enabled is recorded as missing.
func (c *Controller) create(h *hierarchy) error {
	cleanStale(h.dir)
	dir := filepath.Join(h.dir, fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), seq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		for _, k := range h.kinds {
			c.missing[k] = fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		return err
	}
	h.dir = dir
	if !h.v2 {
		return nil
	}
	var enabled []string
	for _, k := range h.kinds {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+k), 0); err != nil {
			c.missing[k] = fmt.Errorf("enable the %s controller in %s: %w", k, dir, err)
			continue
		}
		enabled = append(enabled, k)
	}
	h.kinds = enabled
	if len(enabled) == 0 {
		_ = os.Remove(dir)
		return errors.New("no controller enabled")
	}
	return nil
}

// Supports is nil when groups with the controller kind can be made, else
// why not.
func (c *Controller) Supports(kind string) error {
	for _, h := range c.hier {
		if h.holds(kind) {
			return nil
		}
	}
	if err := c.missing[kind]; err != nil {
		return err
	}
	return fmt.Errorf("no %s controller", kind)
}

// Dir is the gateway's directory in the cpu hierarchy (else its first).
func (c *Controller) Dir() string {
	for _, h := range c.hier {
		if h.holds(CPU) {
			return h.dir
		}
	}
	return c.hier[0].dir
}

// Dirs are the gateway's directories, one a hierarchy.
func (c *Controller) Dirs() []string {
	var ds []string
	for _, h := range c.hier {
		ds = append(ds, h.dir)
	}
	return ds
}

// Place creates instance id's group with what r sets and moves pid and
// every member of its process group into it.
func (c *Controller) Place(id string, r Resources, pid int) (*Group, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return nil, fmt.Errorf("instance id %q cannot name a cgroup", id)
	}
	for _, kind := range []string{CPU, Memory} {
		if err := c.Supports(kind); r.uses(kind) && err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("cgroups are closed")
	}
	g := &Group{c: c, id: id}
	if r.CPURequestMillis > 0 {
		g.shares = SharesFromMillis(r.CPURequestMillis)
	}
	for _, h := range c.hier {
		if err := g.placeIn(h, r, pid); err != nil {
			for _, d := range g.dirs {
				_ = removeGroup(d)
			}
			return nil, err
		}
	}
	c.groups[id] = g
	c.weighLocked()
	return g, nil
}

// placeIn makes the group's directory in h when r uses one of h's
// controllers, writes r's settings there and moves pid in.
func (g *Group) placeIn(h *hierarchy, r Resources, pid int) error {
	var files [][2]string
	for _, k := range h.kinds {
		if r.uses(k) {
			files = append(files, settings(k, h.v2, r)...)
		}
	}
	if len(files) == 0 {
		return nil
	}
	dir := filepath.Join(h.dir, g.id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	g.dirs = append(g.dirs, dir)
	if h.holds(CPU) && r.uses(CPU) {
		g.cpuDir = dir
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0); err != nil {
			return fmt.Errorf("write %s %s: %w", f[0], f[1], err)
		}
	}
	return move(dir, pid)
}

// settings are the files and values that hold a group to r for the
// controller kind.
func settings(kind string, v2 bool, r Resources) [][2]string {
	var fs [][2]string
	set := func(file string, v int64) { fs = append(fs, [2]string{file, strconv.FormatInt(v, 10)}) }
	switch {
	case kind == Memory && v2:
		set("memory.min", r.MemoryRequestBytes)
	case kind == Memory:
		set("memory.soft_limit_in_bytes", r.MemoryRequestBytes)
	case v2:
		if r.CPURequestMillis > 0 {
			set("cpu.weight", WeightFromShares(SharesFromMillis(r.CPURequestMillis)))
		}
		if r.CPULimitMillis > 0 {
			fs = append(fs, [2]string{"cpu.max", fmt.Sprintf("%d %d", quota(r.CPULimitMillis), Period)})
		}
	default:
		if r.CPURequestMillis > 0 {
			set("cpu.shares", SharesFromMillis(r.CPURequestMillis))
		}
		if r.CPULimitMillis > 0 {
			set("cpu.cfs_period_us", Period)
			set("cpu.cfs_quota_us", quota(r.CPULimitMillis))
		}
	}
	return fs
}

func quota(millis int64) int64 { return max(millis*Period/1000, minQuota) }

// weighLocked gives the gateway's cpu directory the sum of its instances'
// requested shares (at least the default), as the kubelet gives its QoS
// group the sum of its pods' requests: the shares of an instance count
// among its siblings, and the directory's against the machine's other
// processes, so a request of two CPUs is worth two CPUs under contention.
func (c *Controller) weighLocked() {
	var h *hierarchy
	for _, x := range c.hier {
		if x.holds(CPU) {
			h = x
		}
	}
	if h == nil {
		return
	}
	sum := int64(0)
	for _, g := range c.groups {
		sum += g.shares
	}
	shares := min(max(sum, defaultShares), maxShares)
	if h.v2 {
		_ = os.WriteFile(filepath.Join(h.dir, "cpu.weight"), []byte(strconv.FormatInt(WeightFromShares(shares), 10)), 0)
		return
	}
	_ = os.WriteFile(filepath.Join(h.dir, "cpu.shares"), []byte(strconv.FormatInt(shares, 10)), 0)
}

// move puts pid in the group directory dir, then whatever its process
// group forked before it got there.
func move(dir string, pid int) error {
	procs := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move process %d into %s: %w", pid, dir, err)
	}
	for _, p := range groupMembers(pid) {
		if p != pid {
			_ = os.WriteFile(procs, []byte(strconv.Itoa(p)), 0) // it may have exited
		}
	}
	return nil
}

// Dir is the instance's group directory in the cpu hierarchy (else its
// first).
func (g *Group) Dir() string {
	if g.cpuDir != "" || len(g.dirs) == 0 {
		return g.cpuDir
	}
	return g.dirs[0]
}

// Dirs are the instance's group directories, one a hierarchy it uses.
func (g *Group) Dirs() []string { return append([]string(nil), g.dirs...) }

// Stat reads the group's cpu.stat (nr_throttled, throttled_time or
// throttled_usec, ...).
func (g *Group) Stat() (map[string]int64, error) {
	return readStat(filepath.Join(g.cpuDir, "cpu.stat"))
}

// Remove kills what is left in the group (the instance has ended) and
// deletes it; the gateway's directories too when it is closed and this
// was its last group.
func (g *Group) Remove() error {
	g.c.mu.Lock()
	delete(g.c.groups, g.id)
	last := g.c.closed && len(g.c.groups) == 0
	if !g.c.closed {
		g.c.weighLocked()
	}
	g.c.mu.Unlock()
	var errs []error
	for _, d := range g.dirs {
		errs = append(errs, removeGroup(d))
	}
	if last {
		errs = append(errs, g.c.removeAll())
	}
	return errors.Join(errs...)
}

// Close refuses new groups and removes the gateway's directories, now if
// no instance has a group, else once the last one is removed: instances
// still stopping keep their limits until they end.
func (c *Controller) Close() error {
	c.mu.Lock()
	c.closed = true
	empty := len(c.groups) == 0
	c.mu.Unlock()
	if !empty {
		return nil
	}
	return c.removeAll()
}

func (c *Controller) removeAll() error {
	var errs []error
	for _, h := range c.hier {
		errs = append(errs, removeTree(h.dir))
	}
	return errors.Join(errs...)
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

// findParent is the directory to create the gateway's in for the
// controller kind: the gateway's own group in a cgroup v2 hierarchy with
// that controller available, else in cgroup v1's hierarchy of it.
func findParent(kind string, own map[string]string) (dir string, v2 bool, err error) {
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
			if !hasWord(string(ctl), kind) {
				reasons = append(reasons, fmt.Sprintf("cgroup v2 at %s has no %s controller", point, kind))
				continue
			}
			if writable(d) {
				return d, true, nil
			}
			reasons = append(reasons, fmt.Sprintf("cgroup v2 group %s is not writable", d))
		case fstype == "cgroup" && hasWord(strings.ReplaceAll(g[2], ",", " "), kind) && v1 == "":
			d := filepath.Join(point, strings.TrimPrefix(own[kind], root))
			if writable(d) {
				v1 = d
			} else {
				reasons = append(reasons, fmt.Sprintf("cgroup v1 %s group %s is not writable", kind, d))
			}
		}
	}
	if v1 != "" {
		return v1, false, nil
	}
	if len(reasons) == 0 {
		reasons = append(reasons, fmt.Sprintf("no cgroup %s controller is mounted", kind))
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
