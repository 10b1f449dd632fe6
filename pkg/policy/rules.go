package policy

import (
	"fmt"
	"time"
)

// The rules of the driver contract that are pure functions of what a
// driver knows. Each is the one place its rule is written; both drivers
// call it, and pkg/policy/policytest has a script for each.

// Arrival is what a driver knows of a function when a request arrives.
type Arrival struct {
	// Queued is the requests already waiting there.
	Queued int
	// Free reports an instance that can start a request now.
	Free bool
	// MaxQueue is the function's queue bound.
	MaxQueue int
}

// Admission is where an arriving request goes.
type Admission uint8

const (
	// RunNow: on the free instance TakesBefore picks.
	RunNow Admission = iota
	// StartOwn: on a new instance of its own (Caps.Dedicated), which the
	// driver starts now and the request waits for. When no instance can
	// start (capacity), the driver asks Queue where the request goes.
	StartOwn
	// Enqueue: into the function's queue, in the policy's run order.
	Enqueue
	// Refuse: the queue is full; the request is refused before the policy
	// sees it (HTTP 429 live, Result.Rejected in simulation).
	Refuse
)

// Admit places an arriving request. A request runs at once only when
// nothing is queued ahead of it, so the run order is never overtaken. The
// policy's Arrive is called for every request not refused, after it is
// placed.
func (c *Contract) Admit(a Arrival) Admission {
	switch {
	case a.Queued == 0 && a.Free:
		return RunNow
	case c.Caps.Dedicated:
		return StartOwn
	}
	return Queue(a)
}

// Queue places a request that goes to the queue: Enqueue, or Refuse at the
// bound.
func Queue(a Arrival) Admission {
	if a.Queued >= a.MaxQueue {
		return Refuse
	}
	return Enqueue
}

// Scale is what a driver knows of a function when it applies a decision.
type Scale struct {
	// Live counts instances serving or starting; Idle those of them
	// running nothing; Queued the requests waiting.
	Live, Idle, Queued int
	// MinScale is the floor a retirement never goes below and a plan
	// always restores; MaxScale the ceiling (0: none).
	MinScale, MaxScale int
}

// Apply turns a policy's decision for one function into what the driver
// does, retirements first: stop retire idle instances (the ones
// RetiresBefore picks), then start add. It keeps MinScale, stops at
// MaxScale, and strands no request: a function with requests queued and
// no instance left gets one, whatever the policy says. A negative decision
// is a broken policy.
func Apply(d Decision, s Scale) (add, retire int, err error) {
	if d.Add < 0 || d.Retire < 0 {
		return 0, 0, fmt.Errorf("%w: decision %+v", ErrBadSpec, d)
	}
	retire = max(0, min(d.Retire, s.Idle, s.Live-s.MinScale))
	live := s.Live - retire
	add = Grow(max(d.Add, s.MinScale-live), live, s.MaxScale)
	if s.Queued > 0 && live+add == 0 {
		add = Grow(1, live, s.MaxScale)
	}
	return add, retire, nil
}

// Grow bounds a start of n instances on a function with live ones by its
// MaxScale (0: none). Every start a policy asks for (Plan, Arrive,
// LookAhead) passes through it.
func Grow(n, live, maxScale int) int {
	if maxScale > 0 {
		n = min(n, maxScale-live)
	}
	return max(0, n)
}

// Idle describes an instance with a free slot, to choose among them.
type Idle struct {
	// Created orders instances by creation; FreedSeq by when a slot of
	// theirs last came free (the driver's own counters, larger is later).
	Created, FreedSeq uint64
	// Node is where the instance runs, lower first (0 on a single node).
	Node int
}

// TakesBefore reports whether instance a, rather than b, takes an arriving
// request. By default the lowest node's most recently freed instance
// does, so load drains off the high nodes and the longest idle instances
// age out; under an instance model with NewestFirst the newest instance
// does (SimFaaS).
func (c *Contract) TakesBefore(a, b Idle) bool {
	if c.Caps.Instances.NewestFirst {
		return a.Created > b.Created
	}
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	return a.FreedSeq > b.FreedSeq
}

// RetiresBefore reports whether idle instance a, rather than b, is
// retired first: the highest node's longest idle.
func RetiresBefore(a, b Idle) bool {
	if a.Node != b.Node {
		return a.Node > b.Node
	}
	return a.FreedSeq < b.FreedSeq
}

// ViewCap bounds the queued requests a detailed view lists: at least the
// default queue bound, so that under it a policy sees the whole queue,
// and at least the instances the platform can hold (capacity; 0 when
// unbounded), more than a tick can start. Past it a longer backlog
// changes nothing a plan decides, and View.Queued still counts it all.
func ViewCap(capacity int) int { return max(DefaultMaxQueue, capacity) }

// SplitSLO splits an app's SLO over its chain in proportion to weights:
// the functions' declared SLOs where the driver has them (the stack file),
// else each function's share of the chain's longest execution (the
// simulator's apps), the way Kraken and Fifer derive per-stage slack.
// Each share is at least a millisecond; with no positive weight the
// shares are equal. It returns each function's budget and the cumulative
// budget up to and including it.
func SplitSLO(slo time.Duration, weights []float64) (share, cum []time.Duration) {
	var total float64
	for _, w := range weights {
		total += max(0, w)
	}
	share, cum = make([]time.Duration, len(weights)), make([]time.Duration, len(weights))
	var sum time.Duration
	for i, w := range weights {
		f := 1 / float64(len(weights))
		if total > 0 {
			f = max(0, w) / total
		}
		share[i] = max(time.Millisecond, time.Duration(f*float64(slo)))
		sum += share[i]
		cum[i] = sum
	}
	return share, cum
}

// coldStartWeight is the newest measurement's weight in a function's
// expected cold start.
const coldStartWeight = 0.3

// ColdStartEstimate is what a function's next start is expected to take:
// the declared cold start until one is measured, then a moving average of
// the measured ones. A policy plans a chain with the longest of its
// functions' (Contract.SetColdStart).
type ColdStartEstimate struct {
	d        time.Duration
	measured bool
}

// NewColdStartEstimate starts from the declared cold start.
func NewColdStartEstimate(declared time.Duration) ColdStartEstimate {
	return ColdStartEstimate{d: declared}
}

// Observe folds in a measured start; a start that is not positive is not
// a measurement.
func (e *ColdStartEstimate) Observe(d time.Duration) {
	switch {
	case d <= 0:
	case !e.measured:
		e.d, e.measured = d, true
	default:
		e.d = time.Duration(coldStartWeight*float64(d) + (1-coldStartWeight)*float64(e.d))
	}
}

// Value is the expected cold start.
func (e ColdStartEstimate) Value() time.Duration { return e.d }

// Capacity. When the platform is full (the simulator's cores, the live
// dispatcher's --capacity), a start is held back: the driver remembers it
// (reset at every plan, which asks again) and grants it when room frees,
// in GrantsBefore's order. A function may take room from a less critical
// one (Preempts): an idle instance of the victim stops at once and the
// room is the taker's; a busy one drains, stops after its request, and its
// room goes to whoever GrantsBefore puts first. Victims are picked in
// YieldsBefore's order.

// Claim is a function's standing when it waits for room.
type Claim struct {
	Criticality int
	// Queued is its requests waiting.
	Queued int
}

// GrantsBefore reports whether freed room goes to a function claiming a
// rather than b: the more critical first, then the one with more waiting.
func GrantsBefore(a, b Claim) bool {
	if a.Criticality != b.Criticality {
		return a.Criticality > b.Criticality
	}
	return a.Queued > b.Queued
}

// Preempts reports whether a function of criticality taker may take room
// from one of criticality victim.
func Preempts(taker, victim int) bool { return victim < taker }

// Yielder is an instance that could give its room up.
type Yielder struct {
	Criticality int
	Idle
}

// YieldsBefore reports whether instance a gives its room up before b: the
// least critical function's first, then its longest idle.
func YieldsBefore(a, b Yielder) bool {
	if a.Criticality != b.Criticality {
		return a.Criticality < b.Criticality
	}
	return a.FreedSeq < b.FreedSeq
}
