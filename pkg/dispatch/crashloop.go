package dispatch

// Crash loops back off (policy.CrashLoop, the kubelet's CrashLoopBackOff):
// a function whose starts fail, or whose instances crash in a row, is
// restarted after a growing delay, one probe at a time and only on demand.
// Requests that wait on a start that fails, or arrive while the function
// backs off with nothing to run on, are answered at once with the last
// exit reason instead of waiting for a start that will not come.

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrStartFailed marks a request refused because its function's instances
// fail to start or keep crashing (HTTP 503); the error is a
// *CrashLoopError with the reason.
var ErrStartFailed = errors.New("instances fail to start")

// CrashLoopError is a request refused by a crash loop.
type CrashLoopError struct {
	Function string
	// Reason is the last exit reason: exit code and last stderr lines.
	Reason string
	// Restarts counts the failures so far.
	Restarts int
	// RetryAfter is how long the back-off still lasts (0 when the next
	// request may start a probe at once).
	RetryAfter time.Duration
}

func (e *CrashLoopError) Error() string {
	wait := ""
	if e.RetryAfter > 0 {
		wait = fmt.Sprintf(", backing off %v more", e.RetryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("function %q is crash-looping (%d failures%s): %s", e.Function, e.Restarts, wait, e.Reason)
}

func (e *CrashLoopError) Unwrap() error { return ErrStartFailed }

// maxReason bounds the exit reason kept per function.
const maxReason = 2048

// lockedFailure records a failed start (start) or a crashed instance of fn
// at now: the back-off grows, and when fn has nothing left to run requests
// on while it backs off, the requests waiting fail at once.
func (d *Dispatcher) lockedFailure(fn *function, err error, start bool, now time.Time) {
	if start {
		fn.loop.StartFailed(now)
	} else {
		fn.loop.Crashed(now)
	}
	fn.reason = "unknown"
	if err != nil {
		fn.reason = err.Error()
	}
	if len(fn.reason) > maxReason {
		fn.reason = fn.reason[:maxReason] + "..."
	}
	d.lockedUnbind(fn)
	if _, backing := fn.loop.BackingOff(now); backing && d.lockedNothingToRunOn(fn) {
		d.lockedFailQueued(fn, d.lockedCrashLoopError(fn, now))
	}
}

// lockedNothingToRunOn reports a function with no instance serving or
// starting: its queued requests wait on nothing.
func (d *Dispatcher) lockedNothingToRunOn(fn *function) bool {
	if len(fn.startingAt) > 0 {
		return false
	}
	for _, in := range fn.ready {
		if !in.draining {
			return false
		}
	}
	return true
}

func (d *Dispatcher) lockedCrashLoopError(fn *function, now time.Time) *CrashLoopError {
	e := &CrashLoopError{Function: fn.decl.Qualified(), Reason: fn.reason, Restarts: fn.loop.Restarts}
	if until, backing := fn.loop.BackingOff(now); backing {
		e.RetryAfter = until.Sub(now)
	}
	return e
}

// lockedRefuseBackingOff is the error for a request arriving at fn while
// it backs off with nothing to run on, or nil; the arrival counts as
// demand for the next probe either way.
func (d *Dispatcher) lockedRefuseBackingOff(fn *function, now time.Time) error {
	fn.demandAt = now
	if _, backing := fn.loop.BackingOff(now); !backing || !d.lockedNothingToRunOn(fn) {
		return nil
	}
	fn.stats.BackedOff++
	return d.lockedCrashLoopError(fn, now)
}

// lockedStarts is how many more starts fn may have now: no limit unless it
// is crash-looping (policy.CrashLoop.Starts).
func (d *Dispatcher) lockedStarts(fn *function, now time.Time) int {
	if !fn.loop.Failing() {
		return math.MaxInt
	}
	demand := fn.queue.Len() > 0 || len(fn.bound) > 0 || d.peers.Queued(fn.decl.Ref()) > 0 ||
		fn.demandAt.After(fn.loop.FailedAt()) || fn.liveCount() < fn.decl.MinScale
	return fn.loop.Starts(now, len(fn.startingAt), demand)
}

// lockedRestart starts the probe of every crash-looping function whose
// back-off has passed and that has demand.
func (d *Dispatcher) lockedRestart(now time.Time) {
	for _, g := range d.groups {
		for _, fn := range g.chain {
			if fn.loop.Failing() && d.lockedStarts(fn, now) > 0 {
				d.lockedScaleUp(fn, 1, now)
			}
		}
	}
}

// Restart starts, at the clock's time, the probes that crash-looping
// functions are due; Run calls it when a back-off ends.
func (d *Dispatcher) Restart() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || !d.peers.Decides() {
		return
	}
	d.lockedRestart(d.cfg.Now())
}

// NextRestart is when the earliest back-off of a function that would
// restart then ends.
func (d *Dispatcher) NextRestart() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var next time.Time
	now := d.cfg.Now()
	for _, fn := range d.fns {
		until, backing := fn.loop.BackingOff(now)
		if backing && (next.IsZero() || until.Before(next)) {
			next = until
		}
	}
	return next, !next.IsZero()
}

// State names of a function (FunctionStatus.State).
const (
	StateReady    = "ready"    // an instance serves
	StateStarting = "starting" // an instance is starting, none ready
	StateBackOff  = "backoff"  // crash-looping: no start before the back-off ends
	StateFailed   = "failed"   // the last start failed; the next request starts a probe
	StateIdle     = "idle"     // scaled to zero
)

func (f *function) lockedState(now time.Time) string {
	ready := 0
	for _, in := range f.ready {
		if !in.draining {
			ready++
		}
	}
	_, backing := f.loop.BackingOff(now)
	switch {
	case ready > 0:
		return StateReady
	case len(f.startingAt) > 0:
		return StateStarting
	case backing:
		return StateBackOff
	case f.loop.Failing():
		return StateFailed
	}
	return StateIdle
}
