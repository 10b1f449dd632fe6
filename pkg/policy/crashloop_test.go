package policy

import (
	"testing"
	"time"
)

func TestCrashLoopDoublesToItsCapAndProbesOneAtATime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var c CrashLoop
	if n := c.Starts(t0, 0, false); n != MaxStarts {
		t.Fatalf("a function that never failed may start %d, want no limit", n)
	}
	now := t0
	var waits []time.Duration
	for range 12 {
		w := c.StartFailed(now)
		waits = append(waits, w)
		if until, ok := c.BackingOff(now); !ok || !until.Equal(now.Add(w)) {
			t.Fatalf("after a failure: backing off %v until %v, want until %v", ok, until, now.Add(w))
		}
		if n := c.Starts(now, 0, true); n != 0 {
			t.Fatalf("%d starts allowed while backing off", n)
		}
		now = now.Add(w)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300}
	for i, w := range want {
		if waits[i] != w*time.Second {
			t.Fatalf("waits %v, want %v seconds", waits, want)
		}
	}
	if c.Restarts != 12 {
		t.Fatalf("restarts %d, want 12", c.Restarts)
	}
	// Past the back-off: one probe, only on demand, never two at once.
	if n := c.Starts(now, 0, false); n != 0 {
		t.Fatalf("without demand %d starts, want 0", n)
	}
	if n := c.Starts(now, 0, true); n != 1 {
		t.Fatalf("on demand %d starts, want 1", n)
	}
	if n := c.Starts(now, 1, true); n != 0 {
		t.Fatalf("with a probe pending %d starts, want 0", n)
	}
	c.Ready(now)
	if n := c.Starts(now, 1, false); n != MaxStarts || c.Failing() {
		t.Fatalf("after a ready instance %d starts (failing %v), want no limit", n, c.Failing())
	}
	// A crash within the reset period backs off from where it was.
	if w := c.Crashed(now.Add(time.Minute)); w != 5*time.Minute {
		t.Fatalf("crash a minute after ready waits %v, want 5m", w)
	}
}

func TestCrashLoopFirstCrashIsImmediateAndHealthForgives(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var c CrashLoop
	c.Ready(t0)
	if w := c.Crashed(t0.Add(time.Second)); w != 0 {
		t.Fatalf("first crash waits %v, want 0", w)
	}
	if w := c.Crashed(t0.Add(2 * time.Second)); w != CrashLoopInitial {
		t.Fatalf("second crash in a row waits %v, want %v", w, CrashLoopInitial)
	}
	now := t0.Add(3 * time.Second)
	for range 4 {
		now = now.Add(c.StartFailed(now))
	}
	c.Ready(now)
	if w := c.Crashed(now.Add(CrashLoopReset - time.Second)); w <= CrashLoopInitial {
		t.Fatalf("crash before the reset period waits %v, want the grown delay", w)
	}
	c.Ready(now.Add(CrashLoopReset))
	if w := c.Crashed(now.Add(2 * CrashLoopReset)); w != 0 {
		t.Fatalf("crash after %v healthy waits %v, want 0 (forgiven)", CrashLoopReset, w)
	}
	c.StartFailed(now.Add(2 * CrashLoopReset))
	c.Reset()
	if _, ok := c.BackingOff(now.Add(2 * CrashLoopReset)); ok || c.Restarts != 9 {
		t.Fatalf("after Reset: backing off %v, restarts %d; want none and the count kept", ok, c.Restarts)
	}
}
