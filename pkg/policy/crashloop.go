package policy

import "time"

// Crash-loop back-off, as the kubelet's CrashLoopBackOff: a function whose
// instances exit before they are ready, or crash again and again, is
// restarted after a delay that doubles with every failure, up to a
// ceiling, and forgiven once an instance has stayed healthy long enough.
// It is a rule of the live driver only (the simulator's instances never
// fail), kept here because it decides when a start may happen.

const (
	// CrashLoopInitial is the delay after a start that failed, or after a
	// crash that follows another failure by less than CrashLoopReset.
	CrashLoopInitial = time.Second
	// CrashLoopMax caps the delay.
	CrashLoopMax = 5 * time.Minute
	// CrashLoopReset forgives past failures: an instance healthy this long
	// since the last failure makes the next one count as the first.
	CrashLoopReset = 10 * time.Minute
)

// CrashLoop is one function's restart back-off. The zero value is a
// function that never failed.
type CrashLoop struct {
	// Restarts counts the failures (starts that never became ready,
	// instances that exited on their own) since the function was declared.
	Restarts int
	// delay is the wait the next failure imposes.
	delay time.Duration
	// until is when a start may happen again; failedAt the last failure.
	until, failedAt time.Time
	// failing: no instance became ready since the last failure, so starts
	// go one at a time (a probe), never in a burst.
	failing bool
	// healthySince is when an instance first became ready after the last
	// failure (zero if none did).
	healthySince time.Time
}

// StartFailed records a start that never became ready at now and returns
// how long starts wait: at least CrashLoopInitial.
func (c *CrashLoop) StartFailed(now time.Time) time.Duration {
	return c.fail(now, true)
}

// Crashed records a ready instance that exited on its own at now and
// returns how long starts wait. The first crash of a healthy function is
// replaced at once, as the kubelet restarts a container the first time
// without delay; crashes in a row back off.
func (c *CrashLoop) Crashed(now time.Time) time.Duration {
	return c.fail(now, false)
}

func (c *CrashLoop) fail(now time.Time, start bool) time.Duration {
	if !c.healthySince.IsZero() && now.Sub(c.healthySince) >= CrashLoopReset {
		c.delay = 0
	}
	wait := c.delay
	if start {
		wait = max(wait, CrashLoopInitial)
	}
	c.Restarts++
	c.failing, c.failedAt, c.healthySince = true, now, time.Time{}
	c.until = now.Add(wait)
	c.delay = min(max(2*wait, CrashLoopInitial), CrashLoopMax)
	return wait
}

// Ready records an instance that became ready at now.
func (c *CrashLoop) Ready(now time.Time) {
	c.failing = false
	if c.healthySince.IsZero() {
		c.healthySince = now
	}
}

// Reset forgets the back-off (a new declaration, as Kubernetes rolls out
// new pods with a fresh one); the restart count stays.
func (c *CrashLoop) Reset() {
	restarts := c.Restarts
	*c = CrashLoop{Restarts: restarts}
}

// Failing reports that the last thing that happened was a failure: no
// instance has been ready since.
func (c *CrashLoop) Failing() bool { return c.failing }

// BackingOff reports that starts must wait at now, and until when.
func (c *CrashLoop) BackingOff(now time.Time) (time.Time, bool) {
	return c.until, c.failing && now.Before(c.until)
}

// FailedAt is when the last failure happened (zero if none).
func (c *CrashLoop) FailedAt() time.Time { return c.failedAt }

// Starts is how many starts a function may have pending at now, given
// pending already and whether anything asks for an instance (demand: a
// request waiting or refused since the last failure, or the minimum
// scale unmet). A healthy function is not limited; a failing one gets one
// probe at a time once its back-off has passed, and only on demand, so a
// function scaled to zero with no requests is never restarted.
func (c *CrashLoop) Starts(now time.Time, pending int, demand bool) int {
	switch {
	case !c.failing:
		return MaxStarts
	case now.Before(c.until) || pending > 0 || !demand:
		return 0
	}
	return 1
}

// MaxStarts stands for "no limit" in Starts.
const MaxStarts = 1 << 30
