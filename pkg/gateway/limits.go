package gateway

// Limits and requests. Locally a memory limit is enforced by pkg/memwatch
// (the instance's whole process tree's resident memory, sampled several
// times a second, killed past the limit) and reported as OOM in the
// function's status, the metrics and the caller's 502. A CPU limit, a CPU
// request and a memory request are honoured by a cgroup per instance that
// the gateway creates and removes (pkg/cpulimit): a CFS quota, a CPU
// weight and reclaim protection, as the kubelet sets them for a container.
// Where the gateway can create no cgroup with the controller one needs
// (not root, no writable controller) a deploy that sets it is refused
// with the reason, since it would be accepted and ignored.
// readOnlyRootFilesystem cannot be made true for a local process without
// a mount namespace: refused (backend.LocalRefusal).

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"

	"gantry.dev/gantry/pkg/cpulimit"

	"gantry.dev/gantry/pkg/memwatch"
	"gantry.dev/gantry/pkg/stack"
)

// cannotHonour says that a field needs a cgroup controller this gateway
// cannot create groups with.
func cannotHonour(field, kind string, err error) error {
	return fmt.Errorf("%s cannot be enforced by this gateway: it can create no cgroup with the %s controller (%v)", field, kind, err)
}

// maxKillRecords bounds the instances whose OOM kill is remembered, for
// the callers' errors.
const maxKillRecords = 1024

// limits keeps the memory watchdog and what it killed.
type limits struct {
	mu      sync.Mutex
	watch   *memwatch.Watcher // started on first use
	byFn    map[string]*oomCount
	byInst  map[string]memwatch.Kill
	order   []string // byInst's keys, oldest first
	counter *prometheus.CounterVec

	cpuOnce sync.Once
	cpu     *cpulimit.Controller // nil when cpuErr says why
	cpuErr  error
	closed  bool
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
	l.closed = true
	l.mu.Unlock()
	if w != nil {
		w.Close()
	}
	// After closed is set no cgroup directory is opened (cpuOnce waits
	// for one being opened). The directory goes once the instances still
	// stopping have ended: Gateway.Close runs before the backend stops
	// them, and they keep their limit until then.
	l.cpuOnce.Do(func() { l.cpuErr = errors.New("the gateway is closed") })
	if l.cpu != nil {
		_ = l.cpu.Close()
	}
}

// cpuGroups opens the gateway's cgroup directory on first use, so that a
// gateway whose functions set no CPU limit creates none.
func (l *limits) cpuGroups() (*cpulimit.Controller, error) {
	l.cpuOnce.Do(func() {
		l.mu.Lock()
		closed := l.closed
		l.mu.Unlock()
		if closed {
			l.cpuErr = errors.New("the gateway is closed")
			return
		}
		l.cpu, l.cpuErr = cpulimit.Open()
	})
	return l.cpu, l.cpuErr
}

// refuseUnenforceable is the local backend's deploy check: a CPU limit, a
// CPU request or a memory request this gateway cannot enforce is refused
// rather than accepted and ignored.
func (l *limits) refuseUnenforceable(f stack.Function) error {
	need := []struct{ field, value, kind string }{
		{"limits.cpu", f.Limits.CPU, cpulimit.CPU},
		{"requests.cpu", f.Requests.CPU, cpulimit.CPU},
		{"requests.memory", f.Requests.Memory, cpulimit.Memory},
	}
	for _, n := range need {
		if n.value == "" {
			continue
		}
		c, err := l.cpuGroups()
		if err == nil {
			err = c.Supports(n.kind)
		}
		if err != nil {
			return cannotHonour(n.field, n.kind, err)
		}
	}
	return nil
}

// groupResources is what an instance's cgroup holds it to.
func groupResources(f stack.Function) cpulimit.Resources {
	return cpulimit.Resources{
		CPULimitMillis:     cpuMillis(f.Limits.CPU),
		CPURequestMillis:   cpuMillis(f.Requests.CPU),
		MemoryRequestBytes: f.Requests.MemoryBytes(),
	}
}

// cpuMillis is a CPU quantity in thousandths of a CPU; 0 when unset.
func cpuMillis(q string) int64 {
	if q == "" {
		return 0
	}
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return 0 // Validate refused it already
	}
	return v.MilliValue()
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

// watchMemory is the part of an instance's hook that holds it to its
// limits and requests: its process tree is watched against the memory
// limit and put in a cgroup with the CPU limit's quota, the CPU request's
// weight and the memory request's protection.
func (g *Gateway) watchMemory(id string, f stack.Function) (started func(int), done func()) {
	memStarted, memDone := g.watchMemoryOnly(id, f)
	res := groupResources(f)
	if res.IsZero() {
		return memStarted, memDone
	}
	var mu sync.Mutex
	var grp *cpulimit.Group
	return func(pid int) {
			if memStarted != nil {
				memStarted(pid)
			}
			g.placeInGroup(id, f, res, pid, func(gr *cpulimit.Group) { mu.Lock(); grp = gr; mu.Unlock() })
		}, func() {
			if memDone != nil {
				memDone()
			}
			mu.Lock()
			gr := grp
			mu.Unlock()
			if gr != nil {
				if err := gr.Remove(); err != nil {
					g.cfg.Logger.Error("instance cgroup not removed", "instance", id, "dirs", gr.Dirs(), "err", err)
				}
			}
		}
}

// placeInGroup puts a started instance in its cgroup. An instance that
// cannot be held to its CPU limit and requests is killed (its start
// fails) rather than left to run without them.
func (g *Gateway) placeInGroup(id string, f stack.Function, res cpulimit.Resources, pid int, keep func(*cpulimit.Group)) {
	c, err := g.limits.cpuGroups()
	if err == nil {
		var gr *cpulimit.Group
		if gr, err = c.Place(id, res, pid); err == nil {
			keep(gr)
			return
		}
	}
	g.cfg.Logger.Error("instance killed: its cgroup cannot be made", "function", f.Qualified(), "instance", id,
		"limits.cpu", f.Limits.CPU, "requests.cpu", f.Requests.CPU, "requests.memory", f.Requests.Memory, "err", err)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// watchMemoryOnly watches the instance's tree against its memory limit.
func (g *Gateway) watchMemoryOnly(id string, f stack.Function) (started func(int), done func()) {
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
	How      string `json:"how,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// requestsEnforcement says how the requests hold locally: the cgroup files
// an instance's group gets, or why they cannot (a deploy would have been
// refused; this shows a function deployed before the machine changed).
func (g *Gateway) requestsEnforcement(f stack.Function) *enforcedJSON {
	e := &enforcedJSON{Value: fmt.Sprintf("memory=%s cpu=%s", f.Requests.Memory, f.Requests.CPU), Enforced: true}
	if !g.local {
		return e
	}
	if err := g.limits.refuseUnenforceable(stack.Function{Requests: f.Requests}); err != nil {
		e.Enforced, e.Reason = false, err.Error()
		return e
	}
	var how []string
	if m := cpuMillis(f.Requests.CPU); m > 0 {
		sh := cpulimit.SharesFromMillis(m)
		how = append(how, fmt.Sprintf("each instance's cgroup: cpu.shares %d (cgroup v2: cpu.weight %d)", sh, cpulimit.WeightFromShares(sh)))
	}
	if b := f.Requests.MemoryBytes(); b > 0 {
		how = append(how, fmt.Sprintf("each instance's cgroup: memory.soft_limit_in_bytes %d (cgroup v2: memory.min)", b))
	}
	e.How = strings.Join(how, "; ")
	return e
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
		e.CPU = &enforcedJSON{Value: f.Limits.CPU, Enforced: true}
		if _, err := g.limits.cpuGroups(); g.local && err != nil {
			e.CPU = &enforcedJSON{Value: f.Limits.CPU, Reason: cannotHonour("limits.cpu", cpulimit.CPU, err).Error()}
		}
	}
	if !f.Requests.IsZero() {
		e.Requests = g.requestsEnforcement(f)
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
