package gateway

// Limits and requests. Locally a memory limit is enforced by pkg/memwatch
// (the instance's whole process tree's resident memory, sampled several
// times a second, killed past the limit) and reported as OOM in the
// function's status, the metrics and the caller's 502. A CPU limit needs a
// cgroup v2 cpu controller delegated to the gateway, which these machines
// do not have (and a cgroup the project did not create is never written),
// so it is shown with enforced: false and the reason. Requests place
// instances on nodes; one machine has nothing to place, so they are shown
// the same way. readOnlyRootFilesystem cannot be made true for a local
// process without a mount namespace: refused (backend.LocalRefusal).

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gantry.dev/gantry/pkg/memwatch"
	"gantry.dev/gantry/pkg/stack"
)

// Why the limits that are not enforced are not.
const (
	reasonCPU = "no cgroup v2 cpu controller is delegated to the gateway on this machine, and it writes to no cgroup it did not create; the CPU limit is not enforced"
	reasonReq = "requests place instances on nodes; the local runtime runs on one machine and places nothing"
)

// maxKillRecords bounds the instances whose OOM kill is remembered, for
// the callers' errors.
const maxKillRecords = 1024

// limits keeps the memory watchdog and what it killed.
type limits struct {
	mu       sync.Mutex
	watch    *memwatch.Watcher // started on first use
	byFn     map[string]*oomCount
	byInst   map[string]memwatch.Kill
	order    []string // byInst's keys, oldest first
	counter  *prometheus.CounterVec
	cpuNoted sync.Once
}

type oomCount struct {
	kills int64
	last  time.Time
}

func newLimits(reg prometheus.Registerer) *limits {
	l := &limits{byFn: map[string]*oomCount{}, byInst: map[string]memwatch.Kill{},
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_function_oom_kills_total",
			Help: "Instances killed by the memory watchdog past their function's memory limit."}, []string{"function_name"})}
	reg.MustRegister(l.counter)
	return l
}

func (l *limits) close() {
	l.mu.Lock()
	w := l.watch
	l.mu.Unlock()
	if w != nil {
		w.Close()
	}
}

// errOOM marks an instance error caused by the memory watchdog.
var errOOM = errors.New("out of memory (OOM)")

func (l *limits) watcher() *memwatch.Watcher {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watch == nil {
		l.watch = memwatch.New(0)
	}
	return l.watch
}

func (l *limits) killed(function string, k memwatch.Kill) {
	l.mu.Lock()
	c := l.byFn[function]
	if c == nil {
		c = &oomCount{}
		l.byFn[function] = c
	}
	c.kills++
	c.last = time.Now()
	if len(l.order) >= maxKillRecords {
		delete(l.byInst, l.order[0])
		l.order = l.order[1:]
	}
	l.byInst[k.ID] = k
	l.order = append(l.order, k.ID)
	l.mu.Unlock()
	l.counter.WithLabelValues(function).Inc()
}

// forget drops a removed function's counts and series (by NAME.NAMESPACE,
// the metrics' label).
func (l *limits) forget(function string) {
	l.mu.Lock()
	delete(l.byFn, function)
	l.mu.Unlock()
	l.counter.DeleteLabelValues(function)
}

// explain says why an instance stopped answering, when the watchdog
// killed it.
func (l *limits) explain(instance string, err error) error {
	l.mu.Lock()
	k, ok := l.byInst[instance]
	l.mu.Unlock()
	if !ok {
		return err
	}
	return fmt.Errorf("%w: instance %s was killed past its memory limit: %d MiB resident in %d processes, limit %d MiB (%v)",
		errOOM, instance, k.RSS>>20, k.Processes, k.Limit>>20, err)
}

// watchMemory is the part of an instance's hook that watches its tree.
func (g *Gateway) watchMemory(id string, f stack.Function) (started func(int), done func()) {
	if f.Limits.CPU != "" {
		g.limits.cpuNoted.Do(func() {
			g.cfg.Logger.Warn("CPU limits are shown but not enforced", "function", f.Name, "reason", reasonCPU)
		})
	}
	limit := f.Limits.MemoryBytes()
	if limit <= 0 {
		return nil, nil
	}
	w := g.limits.watcher()
	return func(pid int) {
			if !w.Add(id, pid, limit, func(k memwatch.Kill) {
				g.cfg.Logger.Warn("instance killed past its memory limit (OOM)", "function", f.Qualified(), "instance", id,
					"rss_mib", k.RSS>>20, "limit", f.Limits.Memory)
				g.limits.killed(f.Qualified(), k)
			}) {
				g.cfg.Logger.Error("memory watchdog full; instance not watched", "instance", id, "max", memwatch.MaxWatched)
			}
		}, func() {
			w.Remove(id)
		}
}

// enforcementJSON says which limits hold and what the watchdog killed.
type enforcementJSON struct {
	Memory   *enforcedJSON `json:"memory,omitempty"`
	CPU      *enforcedJSON `json:"cpu,omitempty"`
	Requests *enforcedJSON `json:"requests,omitempty"`
	OOMKills int64         `json:"oomKills"`
	LastOOM  *time.Time    `json:"lastOOM,omitempty"`
}

type enforcedJSON struct {
	Value    string `json:"value"`
	Enforced bool   `json:"enforced"`
	Reason   string `json:"reason,omitempty"`
}

func (g *Gateway) enforcement(f stack.Function) *enforcementJSON {
	if f.Limits.IsZero() && f.Requests.IsZero() {
		return nil
	}
	e := &enforcementJSON{}
	if f.Limits.Memory != "" {
		e.Memory = &enforcedJSON{Value: f.Limits.Memory, Enforced: true}
	}
	if f.Limits.CPU != "" {
		e.CPU = &enforcedJSON{Value: f.Limits.CPU, Reason: reasonCPU}
	}
	if !f.Requests.IsZero() {
		e.Requests = &enforcedJSON{Value: fmt.Sprintf("memory=%s cpu=%s", f.Requests.Memory, f.Requests.CPU), Reason: reasonReq}
	}
	g.limits.mu.Lock()
	if c := g.limits.byFn[f.Qualified()]; c != nil {
		e.OOMKills = c.kills
		last := c.last
		e.LastOOM = &last
	}
	g.limits.mu.Unlock()
	return e
}
