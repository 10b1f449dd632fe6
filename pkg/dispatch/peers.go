package dispatch

import (
	"errors"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

// ErrRefused: this gateway takes no API writes to its functions (HTTP
// 409); the error wrapping it says why.
var ErrRefused = errors.New("refused")

// Peers is the other gateway replicas in front of the same instances, as
// a dispatcher sees them. A gateway alone has none (Solo, the default);
// pkg/scaleout implements it for a gateway that is one replica of
// several. The dispatcher calls every method with its lock held: they
// must be quick, and reach the dispatcher only through the Locked they
// are handed, never by its own methods.
//
// The methods come in three groups: who decides (Writes, Decides,
// Slots), what the other replicas add to this one's picture (Queued,
// Running, Holds, Requests), and what this replica tells them (Arrived,
// Executed, Changed, Planned).
type Peers interface {
	// Attach hands over the dispatcher, once, from New, as a backend is
	// attached: what drives the peers takes its lock with WithLock.
	Attach(d *Dispatcher)

	// Writes is nil where functions may be deployed, changed, removed
	// and scaled over the API; otherwise the error those writes fail
	// with, wrapping ErrRefused.
	Writes() error
	// Decides reports whether this replica plans: runs the policy's
	// decisions and starts and stops instances. One that does not only
	// routes, to the instances its backend reports.
	Decides() bool
	// Slots is how many of a new instance's slots this replica may
	// use, at most its concurrency.
	Slots(instance string, concurrency int) int

	// Queued counts fn's requests queued at the other replicas.
	Queued(fn string) int
	// Running counts the requests the other replicas run on an instance.
	Running(instance string) int
	// Holds reports whether another replica may still use a slot of one
	// of fn's instances: a draining instance stops only once none may.
	Holds(fn, instance string) bool
	// Requests adds fn's requests at the other replicas to the policy's
	// view: the queued ones, and the running ones too with running.
	Requests(fn string, running bool, add func(queued bool, it Item))

	// Arrived and Executed keep this replica's samples for the replica
	// that decides.
	Arrived(fn string, size float64)
	Executed(fn string, s Sample)
	// Changed says fn's instances changed: one became ready or began to
	// drain.
	Changed(l Locked, fn string)
	// Planned says an autoscaler tick has ended.
	Planned(l Locked)
}

// Item is one request at a replica.
type Item struct {
	Size float64
	// Age is the time queued, or running.
	Age time.Duration
	// Instance runs it; empty while it is queued.
	Instance string
}

// Sample is one execution, as the profiler takes it.
type Sample struct {
	Size   float64
	Exec   time.Duration
	Output float64
}

// Solo is a gateway alone: it decides, uses every slot of its instances,
// and has nobody to tell. Peers that differ in a few methods embed it.
type Solo struct{}

func (Solo) Attach(*Dispatcher)                                {}
func (Solo) Writes() error                                     { return nil }
func (Solo) Decides() bool                                     { return true }
func (Solo) Slots(_ string, concurrency int) int               { return concurrency }
func (Solo) Queued(string) int                                 { return 0 }
func (Solo) Running(string) int                                { return 0 }
func (Solo) Holds(string, string) bool                         { return false }
func (Solo) Requests(string, bool, func(queued bool, it Item)) {}
func (Solo) Arrived(string, float64)                           {}
func (Solo) Executed(string, Sample)                           {}
func (Solo) Changed(Locked, string)                            {}
func (Solo) Planned(Locked)                                    {}

// Locked is the dispatcher while its lock is held, as Peers may act on
// it: read its instances and requests, set the slots this replica may
// use, feed the policy samples from elsewhere, stop what has drained. It
// is valid only inside the call that hands it over.
type Locked struct{ d *Dispatcher }

// WithLock runs f with the dispatcher's lock held.
func (d *Dispatcher) WithLock(f func(Locked)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(Locked{d})
}

// Now is the dispatcher's clock.
func (l Locked) Now() time.Time { return l.d.cfg.Now() }

// Closed reports a dispatcher shutting down.
func (l Locked) Closed() bool { return l.d.closed }

// Functions is every deployed function's declaration; read only.
func (l Locked) Functions() map[string]stack.Function { return l.d.published.Load().fns }

// InstanceState is one instance's slots at this replica.
type InstanceState struct {
	ID, Function string
	// Slots is what this replica may use; Running what it runs there.
	Slots, Running int
	Draining, Gone bool
}

func (in *instance) state() InstanceState {
	return InstanceState{ID: in.ID, Function: in.fn.decl.Ref(), Slots: in.slots, Running: len(in.running),
		Draining: in.draining, Gone: in.gone}
}

// Instances is fn's instances, in the order they became ready.
func (l Locked) Instances(fn string) []InstanceState {
	f := l.d.fns[fn]
	if f == nil {
		return nil
	}
	out := make([]InstanceState, len(f.ready))
	for i, in := range f.ready {
		out[i] = in.state()
	}
	return out
}

// Instance finds an instance by its ID, from its Ready event until its
// Exited one: a stopped instance whose exit is not reported yet is Gone.
func (l Locked) Instance(id string) (InstanceState, bool) {
	in := l.d.byID[id]
	if in == nil {
		return InstanceState{}, false
	}
	return in.state(), true
}

// QueueLen is how many of fn's requests wait here.
func (l Locked) QueueLen(fn string) int {
	if f := l.d.fns[fn]; f != nil {
		return f.queue.Len()
	}
	return 0
}

// Requests is fn's requests here: queued in run order, then running.
func (l Locked) Requests(fn string) (queued, running []Item) {
	f := l.d.fns[fn]
	if f == nil {
		return nil, nil
	}
	now := l.d.cfg.Now()
	for _, q := range f.queue.Ordered(nil) {
		queued = append(queued, Item{Size: q.Value.size, Age: time.Duration(l.d.nanos(now) - q.Enq)})
	}
	for _, in := range f.ready {
		for _, c := range in.running {
			running = append(running, Item{Size: c.size, Age: now.Sub(c.started), Instance: in.ID})
		}
	}
	return queued, running
}

// SetSlots sets the slots of an instance this replica may use (at most
// its function's concurrency), and fills the free ones from the queue.
func (l Locked) SetSlots(id string, n int) {
	in := l.d.byID[id]
	if in == nil {
		return
	}
	in.slots = min(n, in.fn.decl.Concurrency)
	l.d.lockedFeed(in, l.d.cfg.Now())
}

// StopDrained stops every draining instance that may stop now.
func (l Locked) StopDrained() {
	d := l.d
	now := d.cfg.Now()
	for _, fn := range d.fns {
		for _, in := range slices.Clone(fn.ready) {
			if d.lockedDrained(in) {
				d.lockedStop(in, now)
			}
		}
	}
}

// Observe feeds fn's policy requests that arrived and executions that
// ran elsewhere: each arrival as if it had arrived here (scaling up at
// once if the policy says so), each execution to the profiler.
func (l Locked) Observe(fn string, arrivals []float64, executions []Sample) {
	d := l.d
	f := d.fns[fn]
	if f == nil {
		return
	}
	now := d.cfg.Now()
	pol := f.g.pol
	for _, s := range arrivals {
		d.lockedScaleUp(f, pol.Arrive(now, f.idx, s, d.lockedCounts(f)), now)
	}
	for _, e := range executions {
		if err := pol.Complete(f.idx, e.Size, e.Exec, max(e.Output, minOutput)); err != nil {
			d.cfg.Logger.Warn("profiler rejected a peer's sample", "function", fn, "err", err)
		}
	}
	if len(arrivals) > 0 {
		d.lockedLookAhead(f, now)
	}
}
