package dispatch

import (
	"time"
)

// FunctionStats counts what happened at one function. Every accepted
// request ends as Completed, Abandoned, Canceled, Failed, InstanceErrors
// or Hung: nothing is dropped without a count. Crashes counts instances
// lost.
type FunctionStats struct {
	Accepted, Rejected, Started            int64
	Completed, Abandoned, Canceled, Failed int64
	InstanceErrors                         int64
	Spawned, Ready, StartFailures          int64
	Stopped, Crashes                       int64
	// Checks counts health checks after an instance failed a request.
	Checks int64
	// BackedOff counts requests refused at once because the function was
	// backing off from a crash loop with nothing to run them on (they are
	// not Accepted).
	BackedOff int64
	// TimedOut counts requests answered 504 at their function's timeout
	// (each then ends as Abandoned, its answer late, or Hung); Hung the
	// ones whose instance did not free the slot within the grace period,
	// Replaced the instances taken out of rotation for it.
	TimedOut, Hung, Replaced int64
	ColdStartSum             time.Duration
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
