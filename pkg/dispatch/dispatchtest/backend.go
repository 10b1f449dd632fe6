// Package dispatchtest holds what the tests of the dispatcher and of the
// layers over it (pkg/scaleout) share: a backend that records what it is
// asked and makes instances ready when a test says so.
package dispatchtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

// Backend records decisions; tests make instances ready by hand, or
// automatically with auto.
type Backend struct {
	mu        sync.Mutex
	ev        backend.Events
	auto      bool
	starts    map[string]int
	stopped   []string
	seq       int
	readyList []backend.Instance
	// mirrors hear of every instance that becomes ready or stops, as the
	// followers of a scaled-out gateway do from their own backends.
	mirrors []backend.Events
	// failing holds the functions whose starts all fail, with the error.
	failing map[string]error
}

// New returns a backend that makes every instance it starts ready at
// once when auto is set, and only on MakeReady otherwise.
func New(auto bool) *Backend { return &Backend{auto: auto, starts: map[string]int{}} }

func (b *Backend) Attach(ev backend.Events)                     { b.ev = ev }
func (b *Backend) Deploy(context.Context, stack.Function) error { return nil }
func (b *Backend) Undeploy(context.Context, string) error       { return nil }
func (b *Backend) Close(context.Context) error                  { return nil }

func (b *Backend) Stop(inst backend.Instance) {
	b.mu.Lock()
	b.stopped = append(b.stopped, inst.ID)
	mirrors := b.mirrors
	b.mu.Unlock()
	go func() {
		b.ev.Exited(inst, nil)
		for _, m := range mirrors {
			m.Exited(inst, nil)
		}
	}()
}

func (b *Backend) Start(fn string, n int) {
	b.mu.Lock()
	b.starts[fn] += n
	fail, failing := b.failing[fn]
	b.mu.Unlock()
	if failing {
		for range n {
			go b.ev.Failed(fn, fail)
		}
		return
	}
	if b.auto {
		for range n {
			go b.MakeReady(fn)
		}
	}
}

// FailStarts makes every later start of fn fail with err (nil: start
// again as before).
func (b *Backend) FailStarts(fn string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failing == nil {
		b.failing = map[string]error{}
	}
	if err == nil {
		delete(b.failing, fn)
		return
	}
	b.failing[fn] = err
}

// Events is what the dispatcher attached, for a test to report to it.
func (b *Backend) Events() backend.Events { return b.ev }

// Mirror tells ev too of every instance made ready or stopped.
func (b *Backend) Mirror(ev backend.Events) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mirrors = append(b.mirrors, ev)
}

// MakeReady makes one pending instance of fn ready.
func (b *Backend) MakeReady(fn string) backend.Instance { return b.ReadyWith(fn, time.Millisecond) }

// ReadyWith makes one pending instance of fn ready with the given
// measured cold start.
func (b *Backend) ReadyWith(fn string, cold time.Duration) backend.Instance {
	b.mu.Lock()
	b.seq++
	inst := backend.Instance{ID: fmt.Sprintf("%s-%d", fn, b.seq), Function: fn, Addr: "127.0.0.1:1", ColdStart: cold}
	b.readyList = append(b.readyList, inst)
	mirrors := b.mirrors
	b.mu.Unlock()
	b.ev.Ready(inst)
	for _, m := range mirrors {
		m.Ready(inst)
	}
	return inst
}

// Crash reports an unexpected exit of the i-th instance made ready
// (modulo their number).
func (b *Backend) Crash(i int) {
	b.mu.Lock()
	if len(b.readyList) == 0 {
		b.mu.Unlock()
		return
	}
	inst := b.readyList[i%len(b.readyList)]
	b.mu.Unlock()
	b.ev.Exited(inst, errors.New("killed"))
}

// Started is how many instances of fn were asked for.
func (b *Backend) Started(fn string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts[fn]
}

// Stopped is the instances asked to stop, in order.
func (b *Backend) Stopped() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.stopped)
}

// ReadyList is the instances made ready, in order.
func (b *Backend) ReadyList() []backend.Instance {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.readyList)
}

// Function is a declaration with the defaults, sensitive to input size.
func Function(name string, criticality int) stack.Function {
	f := stack.Function{Name: name, Command: "true", Criticality: criticality, SizeSensitive: true}
	f.Defaults()
	return f
}

// WaitFor fails the test unless cond holds within 5 s.
func WaitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
