package dispatch

// Per-function state and slot accounting, after Knative's activator
// throttler: a function's queue in front of its instances' slots. The
// request path (lease.go) only acquires and releases.

import (
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
)

// function is one deployed function's live state.
type function struct {
	decl  stack.Function
	g     *group
	idx   int // position in g's chain
	queue *policy.RunQueue[*call]
	ready []*instance
	// startingAt holds when each pending start was asked for, oldest first.
	startingAt []time.Time
	// want is scale-up the capacity bound held back; it is granted to the
	// most critical function first as capacity frees.
	want int
	// bound lists the requests waiting for an instance of their own
	// under a dedicated policy, in arrival order: each takes the next
	// instance of the function that becomes ready.
	bound []*call
	// coldStart is what the function's next start is expected to take.
	coldStart policy.ColdStartEstimate
	// loop is the restart back-off (crashloop.go); reason the last exit
	// reason, demandAt the last arrival (a request refused while backing
	// off asks for the next probe too).
	loop     policy.CrashLoop
	reason   string
	demandAt time.Time
	stats    FunctionStats
	// created is when the function was first deployed (OpenFaaS's
	// createdAt); an update keeps it.
	created time.Time
}

// liveCount is the instances serving or starting; draining ones are on
// their way out and do not count.
func (f *function) liveCount() int {
	n := len(f.startingAt)
	for _, in := range f.ready {
		if !in.draining {
			n++
		}
	}
	return n
}

// instance is a ready instance and its slots.
type instance struct {
	backend.Instance
	fn        *function
	slots     int
	running   []*call
	idleSince time.Time
	// created orders instances by when they became ready, freedSeq by
	// when a slot of theirs last came free (Dispatcher.seq): the
	// contract's idle choice and retire order read them.
	created, freedSeq uint64
	// draining instances take no new request and stop when idle.
	draining bool
	// suspect instances failed a request and take no new one until their
	// health check answers.
	suspect bool
	gone    bool
	// stopWhenIdle is a hung instance out of rotation that still runs
	// other requests: it is stopped when the last of them ends.
	stopWhenIdle bool
}

func (in *instance) free() int { return in.slots - len(in.running) }

// lockedIdle reports an instance no replica runs anything on.
func (d *Dispatcher) lockedIdle(in *instance) bool {
	return len(in.running) == 0 && d.peers.Running(in.ID) == 0
}

// call is one request at one function.
type call struct {
	fn    *function
	size  float64
	entry policy.Entry
	// got receives the instance the call runs on (buffered, sent once).
	got      chan *instance
	queuedAt time.Time
	started  time.Time
	inst     *instance
	// done is set once the call is assigned, failed or cancelled.
	done bool
	err  error
}

// lockedFreeInstance is the instance a request that finds the queue empty
// runs on: the one policy.Contract.TakesBefore picks among those with a
// free slot.
func (f *function) lockedFreeInstance() *instance {
	var best *instance
	for _, in := range f.ready {
		if in.draining || in.suspect || in.free() <= 0 {
			continue
		}
		if best == nil || f.g.con.TakesBefore(in.order(), best.order()) {
			best = in
		}
	}
	return best
}

// order is what the contract's idle choice and retire order know of an
// instance; a gateway's instances are all on one node.
func (in *instance) order() policy.Idle {
	return policy.Idle{Created: in.created, FreedSeq: in.freedSeq}
}

// lockedOldestIdle is the idle instance of f policy.RetiresBefore picks,
// or nil; with expired set, only one idle since limit or earlier.
func (d *Dispatcher) lockedOldestIdle(f *function, limit time.Time, expired bool) *instance {
	var best *instance
	for _, in := range f.ready {
		if in.draining || !d.lockedIdle(in) || (expired && in.idleSince.After(limit)) {
			continue
		}
		if best == nil || policy.RetiresBefore(in.order(), best.order()) {
			best = in
		}
	}
	return best
}

// claim is the function's standing for room that frees (policy.GrantsBefore).
func (f *function) claim() policy.Claim {
	return policy.Claim{Criticality: f.decl.Criticality, Queued: f.queue.Len()}
}

// lockedScale is what policy.Apply needs to know of f.
func (d *Dispatcher) lockedScale(f *function) policy.Scale {
	c := d.lockedCounts(f)
	return policy.Scale{Live: c.Live, Idle: c.Idle, Queued: f.queue.Len(), MinScale: f.decl.MinScale, MaxScale: f.decl.MaxScale}
}

// lockedCounts is what the policy counts of f: its instances, and its
// requests queued here and at the other replicas.
func (d *Dispatcher) lockedCounts(f *function) policy.Counts {
	c := policy.Counts{Starting: len(f.startingAt), Queued: f.queue.Len() + d.peers.Queued(f.decl.Ref())}
	for _, in := range f.ready {
		if in.draining {
			continue
		}
		c.Live++
		if d.lockedIdle(in) {
			c.Idle++
		}
	}
	c.Live += c.Starting
	return c
}
