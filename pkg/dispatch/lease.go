package dispatch

// The request path: a request acquires a slot on an instance (queueing in
// the policy's order when none is free), holds it as a Lease, and gives it
// back. Handlers call nothing else.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/policy"
)

// Request is one request arriving at a function.
type Request struct {
	Function string
	// Size is the input size, in the function's unit.
	Size float64
	// Deadline is when it must finish at this function: its arrival at
	// the app plus the SLO budget up to here (an async request's: its
	// async budget).
	Deadline time.Time
	// Class is its deadline class; an async request's Slack is how much
	// later its deadline is than a synchronous one's (policy.Enter).
	Class policy.Class
	Slack time.Duration
}

// Lease is a slot on an instance, held for one execution.
type Lease struct {
	d        *Dispatcher
	c        *call
	Instance backend.Instance
	// Waited is the time spent queued.
	Waited time.Duration
	// Timeout bounds the execution.
	Timeout time.Duration
}

func (c *call) fail(err error) {
	c.fn.stats.Failed++
	c.done = true
	c.err = err
	c.got <- nil
}

// Acquire queues a request and returns once an instance has a slot for it,
// or with ErrNotFound, ErrQueueFull, ErrClosed, a start failure or the
// context's error.
func (d *Dispatcher) Acquire(ctx context.Context, r Request) (*Lease, error) {
	c, in, err := d.enqueue(r)
	if err != nil {
		return nil, err
	}
	if in == nil {
		select {
		case in = <-c.got:
		case <-ctx.Done():
			if d.cancel(c) {
				return nil, ctx.Err()
			}
			in = <-c.got // assigned or failed as we gave up: take what came
		}
	}
	if in == nil {
		return nil, c.err
	}
	if err := ctx.Err(); err != nil {
		d.finish(c, 0, 0, false)
		return nil, err
	}
	return &Lease{d: d, c: c, Instance: in.Instance, Waited: c.started.Sub(c.queuedAt), Timeout: in.fn.decl.Timeout}, nil
}

// MaxSize bounds a request's input size: the policy's estimates multiply
// sizes, and past it they overflow.
const MaxSize = 1e300

func (d *Dispatcher) enqueue(r Request) (*call, *instance, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn, ok := d.fns[r.Function]
	switch {
	case d.closed:
		return nil, nil, ErrClosed
	case !ok:
		return nil, nil, fmt.Errorf("%w: function %q", ErrNotFound, r.Function)
	case !(r.Size > 0) || r.Size > MaxSize:
		return nil, nil, fmt.Errorf("input size %v must be a positive number no larger than %g", r.Size, MaxSize)
	}
	now := d.cfg.Now()
	if err := d.lockedRefuseBackingOff(fn, now); err != nil {
		return nil, nil, err
	}
	g := fn.g
	c := &call{fn: fn, size: r.Size, queuedAt: now, got: make(chan *instance, 1),
		entry: policy.Enter(r.Class, d.nanos(now), d.nanos(r.Deadline), int64(r.Slack), g.con.Estimate(fn.idx, r.Size))}
	var in *instance
	if fn.queue.Len() == 0 {
		in = fn.lockedFreeInstance()
	}
	a := policy.Arrival{Queued: fn.queue.Len(), Free: in != nil, MaxQueue: fn.decl.MaxQueue}
	where := g.con.Admit(a)
	if where == policy.StartOwn && !d.lockedStartOwn(fn, c, now) {
		where = policy.Queue(a)
	}
	switch where {
	case policy.RunNow:
		d.lockedRun(c, in, now)
		<-c.got // the slot is ours already; the channel is for waiters
	case policy.Refuse:
		fn.stats.Rejected++
		// A policy that counts refusals sees the demand the queue turned
		// away (policy.Caps.Refusals).
		d.lockedApply(fn, policy.Decision{Add: g.con.Refused(now, fn.idx, r.Size, d.lockedCounts(fn))}, now)
		return nil, nil, fmt.Errorf("%w: function %q has %d requests waiting", ErrQueueFull, fn.decl.Name, fn.queue.Len())
	case policy.Enqueue:
		fn.queue.Push(c.entry, c)
	}
	fn.stats.Accepted++
	d.peers.Arrived(fn.decl.Ref(), r.Size)
	d.lockedApply(fn, policy.Decision{Add: g.pol.Arrive(now, fn.idx, r.Size, d.lockedCounts(fn))}, now)
	d.lockedLookAhead(fn, now)
	if where == policy.RunNow {
		return c, in, nil
	}
	return c, nil, nil
}

// lockedStartOwn starts an instance for call c alone (a dedicated
// policy): c waits for the next instance of fn to be ready. It reports
// false when none can start (the function's maximum, or the capacity).
func (d *Dispatcher) lockedStartOwn(fn *function, c *call, now time.Time) bool {
	if policy.Grow(1, fn.liveCount(), fn.decl.MaxScale) == 0 || d.lockedStarts(fn, now) == 0 || !d.lockedTakeCapacity(fn, now) {
		return false
	}
	d.lockedStart(fn, 1, now)
	fn.bound = append(fn.bound, c)
	return true
}

// cancel takes a queued request out; false when it was already assigned
// an instance or failed.
func (d *Dispatcher) cancel(c *call) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.done || c.inst != nil {
		return false
	}
	c.done = true
	c.fn.queue.RemoveFunc(func(x *call) bool { return x == c })
	c.fn.bound = slices.DeleteFunc(c.fn.bound, func(x *call) bool { return x == c })
	c.fn.stats.Canceled++
	return true
}

// Release returns the slot after an execution that the instance answered
// (whatever its status): exec is the execution time, output the output
// size, both fed to the policy's profiler.
func (l *Lease) Release(exec time.Duration, output float64) { l.d.finish(l.c, exec, output, true) }

// Abandon returns the slot without a sample: the execution ended without
// an answer worth learning from (it timed out and answered late, or the
// gateway is closing).
func (l *Lease) Abandon() { l.d.finish(l.c, 0, 0, false) }

// TimedOut records that the request outlived its function's timeout and
// was answered 504. The slot stays busy: the instance may still be
// working on it, and is sent nothing more than its concurrency. The
// caller ends the lease later with Abandon (the answer came within the
// grace period) or Hung.
func (l *Lease) TimedOut() {
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	l.c.fn.stats.TimedOut++
}

// Hung reports that the instance did not free a timed-out slot within the
// grace period after its function's timeout: it is taken out of rotation,
// replaced when requests wait for it, then stopped (the backend sends
// SIGTERM, then SIGKILL after its grace). The requests queued behind it
// go to the other instances and the replacement, so a hung instance costs
// the one request it hung on.
func (l *Lease) Hung(err error) {
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	in := l.c.inst
	in.fn.stats.Hung++
	d.lockedRemoveRunning(l.c)
	if in.gone || d.closed {
		return
	}
	d.cfg.Logger.Warn("instance hung: replacing it", "instance", in.ID, "err", err)
	d.lockedReplaceHung(in, d.cfg.Now())
}

// Failed reports that the instance did not answer this request (refused,
// reset, closed). The slot is returned without a sample and the request
// counts as an instance error; the caller may retry on another instance.
// One failed request does not kill an instance: it takes no new request
// until its health check (Config.Check) answers. Healthy, it serves again;
// not, it is stopped. An instance whose process exits is removed by the
// backend's Exited event in any case.
func (l *Lease) Failed(err error) {
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	in := l.c.inst
	in.fn.stats.InstanceErrors++
	d.cfg.Logger.Warn("instance failed a request", "instance", in.ID, "err", err)
	d.lockedRemoveRunning(l.c)
	if in.gone {
		return
	}
	if d.lockedDrained(in) {
		d.lockedStop(in, d.cfg.Now())
		return
	}
	d.lockedQuarantine(in)
}

func (d *Dispatcher) finish(c *call, exec time.Duration, output float64, sample bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn := c.fn
	now := d.cfg.Now()
	if sample {
		fn.stats.Completed++
		if err := fn.g.pol.Complete(fn.idx, c.size, exec, max(output, minOutput)); err != nil {
			d.cfg.Logger.Warn("profiler rejected a sample", "function", fn.decl.Name, "err", err)
		} else {
			d.peers.Executed(fn.decl.Ref(), Sample{Size: c.size, Exec: exec, Output: max(output, minOutput)})
		}
		fn.g.con.Finished(now, fn.idx, d.nanos(now), c.entry) // policy.Caps.Outcomes
	} else {
		fn.stats.Abandoned++
	}
	in := c.inst
	d.lockedRemoveRunning(c)
	switch {
	case in.gone:
	case d.lockedDrained(in):
		d.lockedStop(in, now)
		d.lockedGrant(now) // the room it frees goes to the most critical waiting
	default:
		d.lockedFeed(in, now)
	}
}

// minOutput stands in for an empty output, which the profiler's log-space
// fits cannot take.
const minOutput = 1e-6

func (d *Dispatcher) lockedRemoveRunning(c *call) {
	in := c.inst
	for i, x := range in.running {
		if x == c {
			in.running[i] = in.running[len(in.running)-1]
			in.running = in.running[:len(in.running)-1]
			break
		}
	}
	d.seq++
	in.freedSeq = d.seq
	if len(in.running) == 0 {
		in.idleSince = d.cfg.Now()
		if in.stopWhenIdle {
			// A hung instance's last other request ended.
			in.stopWhenIdle = false
			d.be.Stop(in.Instance)
		}
	}
}

// lockedRun starts call c on instance in.
func (d *Dispatcher) lockedRun(c *call, in *instance, now time.Time) {
	c.inst, c.started, c.done = in, now, true
	in.running = append(in.running, c)
	in.fn.stats.Started++
	c.got <- in
}

// lockedFeed gives an instance's free slots to the queue's head.
func (d *Dispatcher) lockedFeed(in *instance, now time.Time) {
	fn := in.fn
	for !in.draining && !in.suspect && in.free() > 0 {
		c, _, ok := fn.queue.Pop(d.nanos(now))
		if !ok {
			return
		}
		d.lockedRun(c, in, now)
	}
}
