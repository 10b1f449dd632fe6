// Package memwatch enforces memory limits on local process trees: one
// goroutine samples, several times a second, the resident memory of every
// watched root process and all its descendants (and of every process left
// in its process group), and kills a tree the moment it is past its limit.
// An address-space rlimit is no memory limit (Go and Python reserve far
// more than they use), and no cgroup is ours to write here, so resident
// memory read from /proc is what is enforced.
package memwatch

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DefaultInterval is how often the trees are sampled: a tree that grows
// faster than limit/interval can overshoot by that much before it dies.
const DefaultInterval = 100 * time.Millisecond

// MaxWatched bounds the trees watched at once (every instance a gateway
// can run).
const MaxWatched = 10000

// rescanEvery is how often every process is read to find the trees'
// members; in between only the known members are read. A full scan of
// about 180 processes costs ~15 ms here, one member's read ~0.1 ms.
const rescanEvery = time.Second

// Kill describes a tree killed past its limit.
type Kill struct {
	ID        string
	RSS       int64 // bytes, the sample that was over
	Limit     int64
	Processes int
}

type watch struct {
	pid   int
	limit int64
	kill  func(Kill)
}

// Watcher samples the watched trees until Close.
type Watcher struct {
	interval time.Duration
	proc     string // /proc, or a test's copy

	// members are each tree's processes at the last full scan.
	members  map[string][]int
	lastScan time.Time

	mu      sync.Mutex
	watched map[string]watch
	added   bool // a tree was added since the last full scan
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// New starts a watcher sampling every interval (DefaultInterval if 0).
func New(interval time.Duration) *Watcher {
	if interval <= 0 {
		interval = DefaultInterval
	}
	w := &Watcher{interval: interval, proc: "/proc", watched: map[string]watch{}, members: map[string][]int{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Add watches the tree rooted at pid (also a process group's leader) under
// id; kill is called, once, just before the tree is sent SIGKILL. It
// reports false past MaxWatched.
func (w *Watcher) Add(id string, pid int, limit int64, kill func(Kill)) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.watched) >= MaxWatched {
		return false
	}
	w.watched[id] = watch{pid: pid, limit: limit, kill: kill}
	w.added = true
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// Remove stops watching id.
func (w *Watcher) Remove(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.watched, id)
}

// Close stops the sampling goroutine and waits for it.
func (w *Watcher) Close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

func (w *Watcher) run() {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		if len(w.watched) == 0 {
			w.mu.Unlock()
			// Nothing to watch: sleep until something is added.
			select {
			case <-w.stop:
				return
			case <-w.wake:
			}
			continue
		}
		snapshot := make(map[string]watch, len(w.watched))
		for id, wt := range w.watched {
			snapshot[id] = wt
		}
		full := w.added || time.Since(w.lastScan) >= rescanEvery
		w.added = false
		w.mu.Unlock()
		if full {
			w.lastScan = time.Now()
			w.sample(snapshot)
		} else {
			w.sampleKnown(snapshot)
		}
	}
}

// proc is one process as /proc shows it.
type proc struct {
	ppid, pgrp int
	rss        int64
}

var pageSize = int64(os.Getpagesize())

// sample reads every process once and kills the trees over their limit.
func (w *Watcher) sample(watched map[string]watch) {
	procs := w.readProcs()
	children := map[int][]int{}
	byGroup := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
		byGroup[p.pgrp] = append(byGroup[p.pgrp], pid)
	}
	clear(w.members)
	for id, wt := range watched {
		tree := treeOf(wt.pid, children, byGroup)
		w.members[id] = tree
		var rss int64
		for _, pid := range tree {
			rss += procs[pid].rss
		}
		w.check(id, wt, tree, rss)
	}
}

// sampleKnown reads only the members the last full scan found. A tree
// that looks over its limit is confirmed by a full scan before anything is
// killed: a member may have exited and its PID gone to another process.
func (w *Watcher) sampleKnown(watched map[string]watch) {
	buf := make([]byte, 0, 1024)
	for id, wt := range watched {
		var rss int64
		for _, pid := range w.members[id] {
			if p, ok := readProc(w.proc+"/"+strconv.Itoa(pid), buf); ok {
				rss += p.rss
			}
		}
		if rss > wt.limit {
			w.lastScan = time.Now()
			w.sample(watched)
			return
		}
	}
}

// check kills a tree over its limit.
func (w *Watcher) check(id string, wt watch, tree []int, rss int64) {
	if rss <= wt.limit {
		return
	}
	w.mu.Lock()
	_, still := w.watched[id]
	delete(w.watched, id)
	w.mu.Unlock()
	if !still {
		return
	}
	// Told first, so that whoever sees the tree die knows why; then the
	// group (what the runtime started), then any descendant that left it.
	wt.kill(Kill{ID: id, RSS: rss, Limit: wt.limit, Processes: len(tree)})
	_ = syscall.Kill(-wt.pid, syscall.SIGKILL)
	for _, pid := range tree {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// treeOf is root, its descendants, and the members of its process group
// (orphans reparented away from it among them).
func treeOf(root int, children, byGroup map[int][]int) []int {
	seen := map[int]bool{}
	var out []int
	queue := []int{root}
	queue = append(queue, byGroup[root]...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out
}

// readProcs reads every process's parent, group and resident pages.
// Processes that exit meanwhile are skipped.
func (w *Watcher) readProcs() map[int]proc {
	d, err := os.Open(w.proc)
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := make(map[int]proc, len(names))
	buf := make([]byte, 0, 1024)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if p, ok := readProc(w.proc+"/"+name, buf); ok {
			out[pid] = p
		}
	}
	return out
}

func readProc(dir string, buf []byte) (proc, bool) {
	stat, err := readSmall(dir+"/stat", buf)
	if err != nil {
		return proc{}, false
	}
	// Fields after the command, which may hold spaces and parentheses:
	// state ppid pgrp ... (proc(5)); rss is field 24, in pages.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 22 {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	pgrp, _ := strconv.Atoi(string(f[2]))
	pages, _ := strconv.ParseInt(string(f[21]), 10, 64)
	return proc{ppid: ppid, pgrp: pgrp, rss: pages * pageSize}, true
}

func readSmall(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Read(buf[:cap(buf)])
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
