package dispatch

import (
	"slices"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

// FunctionStats counts what happened at one function. Every accepted
// request ends as Completed, Abandoned, Canceled, Failed or InstanceErrors:
// nothing is dropped without a count. Crashes counts instances lost.
type FunctionStats struct {
	Accepted, Rejected, Started            int64
	Completed, Abandoned, Canceled, Failed int64
	InstanceErrors                         int64
	Spawned, Ready, StartFailures          int64
	Stopped, Crashes                       int64
	// Checks counts health checks after an instance failed a request.
	Checks       int64
	ColdStartSum time.Duration
}

// Stats is the dispatcher's totals.
type Stats struct {
	// InstanceSeconds is the integral of live instances (starting ones
	// included) over time; divided by the elapsed time it is the mean.
	InstanceSeconds float64
	Since           time.Time
	At              time.Time
}

// lockedAdvance integrates the live-instance count up to now.
func (d *Dispatcher) lockedAdvance(now time.Time) {
	if d.stats.Since.IsZero() {
		d.stats.Since, d.stats.At = now, now
	}
	if dt := now.Sub(d.stats.At); dt > 0 {
		d.stats.InstanceSeconds += float64(d.live) * dt.Seconds()
		d.stats.At = now
	}
}

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
}

// Functions lists the deployed functions by name.
func (d *Dispatcher) Functions() []FunctionStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]FunctionStatus, 0, len(d.fns))
	for _, fn := range d.fns {
		out = append(out, fn.lockedStatus())
	}
	slices.SortFunc(out, func(a, b FunctionStatus) int { return strings.Compare(a.Decl.Name, b.Decl.Name) })
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
	return fn.lockedStatus(), true
}

func (f *function) lockedStatus() FunctionStatus {
	st := FunctionStatus{Decl: f.decl, Replicas: f.liveCount(), Starting: len(f.startingAt),
		Queued: f.queue.Len(), ColdStart: f.coldStart, Stats: f.stats}
	if len(f.g.chain) > 1 || f.g.name != f.decl.Name {
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

// App returns one app.
func (d *Dispatcher) App(name string) (AppInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.apps[name]
	if !ok {
		return AppInfo{}, false
	}
	return g.info(), true
}

func (g *group) info() AppInfo {
	a := AppInfo{Name: g.name, SLO: g.slo, Budget: slices.Clone(g.cum)}
	for _, fn := range g.chain {
		a.Functions = append(a.Functions, fn.decl.Name)
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

// Lookup returns a function's declaration.
func (d *Dispatcher) Lookup(name string) (stack.Function, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn, ok := d.fns[name]
	if !ok {
		return stack.Function{}, false
	}
	return fn.decl, true
}
