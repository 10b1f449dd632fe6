// Package policy is Gantry's deterministic policy core: it decides how many
// containers each function of an app should have and in which order queued
// requests run. A Policy is a pure state machine in the style of etcd raft's
// RawNode: the driver (the simulator, or the live gateway) feeds it
// observations together with the current time and applies the decisions it
// returns. Policies read no clock, start no goroutine and hold no lock.
package policy

import (
	"errors"
	"math/rand/v2"
	"time"
)

var (
	// ErrUnknownPolicy is returned by New for a name not in Names().
	ErrUnknownPolicy = errors.New("unknown policy")
	// ErrBadSpec is returned by New for a Spec that cannot drive a policy.
	ErrBadSpec = errors.New("invalid policy spec")
)

// Order is the run order of a function's queue.
type Order uint8

const (
	// FIFO runs requests in arrival order.
	FIFO Order = iota
	// HeaviestFirst runs the request with the largest predicted execution
	// time first, ties broken by arrival (Cypress's IS Reordering).
	HeaviestFirst
	// LeastSlack runs the request whose deadline minus predicted execution
	// time is earliest first (Gantry's refinement of HeaviestFirst), except
	// that a request which can no longer meet its deadline waits behind
	// every request that still can: under overload, earliest-deadline-first
	// otherwise serves only late requests and every request misses.
	LeastSlack
)

// FunctionSpec describes one function of the app's chain.
type FunctionSpec struct {
	Name string
	// SLO is the function's share of the app SLO: the time within which
	// a request must finish at this function, queueing included.
	SLO time.Duration
	// SizeSensitive is false when execution time does not depend on input
	// size; policies then batch on the mean execution time.
	SizeSensitive bool
}

// Spec is what a policy knows about the app and the platform up front.
type Spec struct {
	App              string
	Functions        []FunctionSpec
	AppSLO           time.Duration
	MinSize, MaxSize float64
	ColdStart        time.Duration
	// Window is the proactive scaling period.
	Window time.Duration
	// Tick is the driver's nominal planning period (default 500 ms); the
	// panic rule measures the arrival rate over at least this long.
	Tick time.Duration
	// Start is the time of the first observation; the oracle uses it to
	// index Truth.Rate.
	Start time.Time
	Seed  uint64
	// KeepAlive, when positive, replaces CommercialKeepAlive in the caps
	// of a policy with an exact keep-alive (Instances.KeepAlive); New
	// refuses it for any other policy, which would ignore it.
	KeepAlive time.Duration
	// SLOTarget is the share of requests that must meet their SLO, in
	// (0, 1); 0 means DefaultSLOTarget. Gantry sizes each function so
	// that at most 1 - SLOTarget of its requests wait past their slack
	// (sizing.go).
	SLOTarget float64
	// Truth is the ground truth; only the oracle policy reads it and it is
	// required for that policy alone.
	Truth *Truth
}

// Truth is perfect knowledge of the future load and of every function.
type Truth struct {
	// Rate is the expected arrival rate (per second) at an offset from
	// Spec.Start.
	Rate       func(offset time.Duration) float64
	ExecMean   func(fn int, size float64) time.Duration
	OutputMean func(fn int, size float64) float64
	// SampleSize draws a first-function input size.
	SampleSize func(rng *rand.Rand) float64
	// Planned is, per function, the clairvoyant plan the oracle follows
	// (see PlanStep); only the oracle reads it.
	Planned [][]PlanStep
}

// Counts summarises one function's containers and queue.
type Counts struct {
	Live     int // warm or starting
	Starting int // still in their cold start
	Idle     int // warm and not running a request
	Queued   int // requests waiting for a container
}

// Item is one request as a policy sees it.
type Item struct {
	Size float64
	// Exec is the execution time the policy predicted for it (Estimate).
	Exec time.Duration
	// Waited is how long it has already spent at this function.
	Waited time.Duration
}

// View is a function's state at a planning tick. Queue, Running and Free
// are filled only for policies with Caps.Detailed.
type View struct {
	Counts
	// MaxWait is the longest time any queued request has waited.
	MaxWait time.Duration
	// Queue holds the queued requests in run order.
	Queue []Item
	// Running holds the requests being executed.
	Running []Item
	// Free holds, for every live container, the predicted time until it
	// can start a new request (0 when idle, the rest of the cold start when
	// starting).
	Free []time.Duration
	// IdleAges holds, for every idle container (warm, running nothing,
	// not draining), how long it has been idle, in no particular order.
	// Both drivers fill it the same way; the idle-age retirement reads
	// it (retire.go).
	IdleAges []time.Duration
}

// Decision is what the driver must do for one function. Add containers are
// started now; Retire idle containers are reclaimed now.
type Decision struct {
	Add, Retire int
}

// Policy is the interface drivers use. All methods are deterministic.
type Policy interface {
	Name() string
	// Order is the run order of every function's queue.
	Order() Order
	// Caps are the policy's capabilities: what it asks of the driver
	// beyond these methods (contract.go). A driver binds a policy with
	// NewContract, which refuses what the driver cannot honour.
	Caps() Caps
	// Estimate predicts the execution time of a request at function fn.
	Estimate(fn int, size float64) time.Duration
	// Arrive records a request entering function fn's queue and returns
	// how many containers to start for fn right away.
	Arrive(now time.Time, fn int, size float64, c Counts) (add int)
	// Complete records a finished execution: its input size, execution
	// time and output size (the next function's input). It rejects
	// samples that are not positive and finite.
	Complete(fn int, size float64, exec time.Duration, output float64) error
	// Plan is called every tick with one View per function and fills out
	// (same length) with the decisions.
	Plan(now time.Time, views []View, out []Decision)
}

// Instances is how a driver manages a policy's idle instances (Caps.Instances).
type Instances struct {
	// NewestFirst gives a request the idle instance created last, as
	// SimFaaS does, instead of the driver's default choice.
	NewestFirst bool
	// KeepAlive, when positive, expires an instance exactly this long
	// after its last request finished.
	KeepAlive time.Duration
}

// names is the order in which reports list the policies: ours last so it
// reads as the answer to the baselines.
var names = []string{"atoll", "commercial", "knative", "kraken", "fifer", "isbatch", "cypress", "oracle", "gantry"}

// extras are named policies New accepts that Names does not list: the
// predictor-fed oracle (gantry's sizing with the trace's expected rate
// and sampled sizes) that `oracle` was before the clairvoyant one.
var extras = []string{"oracle-predicted"}

// Extras lists the named policies outside Names.
func Extras() []string { return append([]string(nil), extras...) }

// Names lists the named policies.
func Names() []string { return append([]string(nil), names...) }
