package dispatch

// The read API: what the gateway's management routes, metrics and
// reports show.

import (
	"slices"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

// FunctionStatus is one function as the API and reports show it.
type FunctionStatus struct {
	Decl      stack.Function
	App       string
	Replicas  int // serving or starting
	Available int // ready
	Starting  int
	Queued    int
	Running   int
	ColdStart time.Duration // the latest measured
	Stats     FunctionStats
	// State is one of the State* names; Restarts counts the failed starts
	// and crashes, Reason is the last exit reason, and BackOffUntil is
	// when a crash loop's back-off ends (zero when not backing off).
	State        string
	Restarts     int
	Reason       string
	BackOffUntil time.Time
	// CreatedAt is when the function was first deployed.
	CreatedAt time.Time
}

// Functions lists the deployed functions by name.
func (d *Dispatcher) Functions() []FunctionStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]FunctionStatus, 0, len(d.fns))
	now := d.cfg.Now()
	for _, fn := range d.fns {
		out = append(out, fn.lockedStatus(now))
	}
	slices.SortFunc(out, func(a, b FunctionStatus) int { return strings.Compare(a.Decl.Ref(), b.Decl.Ref()) })
	return out
}

// Function returns one function's status.
func (d *Dispatcher) Function(name string) (FunctionStatus, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn, ok := d.fns[name]
	if !ok {
		return FunctionStatus{}, false
	}
	return fn.lockedStatus(d.cfg.Now()), true
}

func (f *function) lockedStatus(now time.Time) FunctionStatus {
	st := FunctionStatus{Decl: f.decl, Replicas: f.liveCount(), Starting: len(f.startingAt),
		Queued: f.queue.Len(), ColdStart: f.coldStart.Value(), Stats: f.stats, CreatedAt: f.created,
		State: f.lockedState(now), Restarts: f.loop.Restarts, Reason: f.reason}
	if until, backing := f.loop.BackingOff(now); backing {
		st.BackOffUntil = until
	}
	if len(f.g.chain) > 1 || f.g.name != f.decl.Ref() {
		st.App = f.g.name
	}
	for _, in := range f.ready {
		st.Available++
		st.Running += len(in.running)
	}
	return st
}

// AppInfo is an app's chain and its SLO budgets.
type AppInfo struct {
	Name      string
	Functions []string
	SLO       time.Duration
	// Budget[i] is the SLO budget up to and including function i.
	Budget []time.Duration
}

// Apps lists the apps by name.
func (d *Dispatcher) Apps() []AppInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]AppInfo, 0, len(d.apps))
	for _, g := range d.apps {
		out = append(out, g.info())
	}
	slices.SortFunc(out, func(a, b AppInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (g *group) info() AppInfo {
	a := AppInfo{Name: g.name, SLO: g.slo, Budget: slices.Clone(g.cum)}
	for _, fn := range g.chain {
		a.Functions = append(a.Functions, fn.decl.Ref())
	}
	return a
}

// Totals returns the dispatcher's totals up to now.
func (d *Dispatcher) Totals() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lockedAdvance(d.cfg.Now())
	return d.stats
}

// Live is the number of instances live or starting, all functions together.
func (d *Dispatcher) Live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live
}
