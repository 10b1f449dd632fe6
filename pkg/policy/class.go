package policy

import "time"

// Deadline classes. A synchronous request must finish within its SLO
// budget; an asynchronous one (queued durably, its result POSTed to a
// callback) within a looser deadline of its own, by default a minute. The
// rule of this file is the one place both drivers turn a request's class
// into its place in the run order, so that the autoscaler sees async
// requests (they arrive, queue and run like any other) while a function's
// synchronous requests keep their priority over them.

// Class is a request's deadline class.
type Class uint8

const (
	// Sync: the caller waits; the deadline is the SLO budget.
	Sync Class = iota
	// Async: the caller got 202 and a call ID; the deadline is the
	// function's async deadline.
	Async
)

func (c Class) String() string {
	if c == Async {
		return "async"
	}
	return "sync"
}

// DefaultAsyncDeadline is the async deadline of a function that declares
// none (a stack file's async_deadline, annotation gantry.dev/async-deadline).
const DefaultAsyncDeadline = time.Minute

// AsyncBudget is an async request's budget at a function of a chain: the
// SLO budget up to that function (cum, of the app's SLO appSLO) stretched
// so the chain ends at the async deadline, and never tighter than the
// synchronous budget. For a single function it is the async deadline.
func AsyncBudget(cum, appSLO, async time.Duration) time.Duration {
	if appSLO <= 0 || async <= appSLO {
		return cum
	}
	return time.Duration(float64(cum) * (float64(async) / float64(appSLO)))
}

// Enter is the run-order entry of a request of class c entering a
// function's queue at enq with its deadline there; slack is how much
// later an async request's deadline is than a synchronous request's
// arriving with it would be (its async budget minus its SLO budget).
//
// An async request is ordered exactly as a synchronous request arriving
// slack later would be: its Enq moves by slack too. Every run order then
// keeps it behind the synchronous requests that arrive within its slack
// (FIFO by Enq, IS Reordering's rounds, least slack by deadline), and the
// reactive scalers, which read how long a request has waited (View.Item's
// Waited, View.MaxWait, negative while the slack lasts), scale for it only
// once its slack is spent. Nothing else holds it back: a free instance
// with nothing else queued runs it at once.
func Enter(c Class, enq, deadline, slack, pred int64) Entry {
	if c != Async {
		return Entry{Enq: enq, Deadline: deadline, Pred: pred}
	}
	return Entry{Enq: enq + max(0, slack), Deadline: deadline, Pred: pred}
}
