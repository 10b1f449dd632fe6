package dispatch

import (
	"context"
	"testing"
	"time"
)

// One invocation on a warm function takes the dispatcher's lock twice:
// once to acquire its slot, once to release it. Everything the request
// path reads before it queues comes from the catalog, without the lock.
func TestAnInvocationTakesTheLockTwice(t *testing.T) {
	be := newFake(true)
	d := newTestDispatcher(t, Config{}, be, decl("f", 0))
	warm(t, d, "f")
	taken := d.mu.countLocks()
	if _, ok := d.Lookup("f"); !ok {
		t.Fatal("f not found")
	}
	l, err := d.Acquire(context.Background(), req("f"))
	if err != nil {
		t.Fatal(err)
	}
	l.Release(time.Millisecond, 1)
	if n := taken.Load(); n > 2 {
		t.Fatalf("one invocation took the lock %d times, want at most 2", n)
	}
	t.Logf("one invocation took the lock %d times", taken.Load())
}

// warm runs one request through fn, so that an instance is ready.
func warm(t *testing.T, d *Dispatcher, fn string) {
	t.Helper()
	l, err := d.Acquire(context.Background(), req(fn))
	if err != nil {
		t.Fatal(err)
	}
	l.Release(time.Millisecond, 1)
}
