package rtcontroller

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// traceQueue bounds the traces waiting for the file: a reconcile never
// waits for the disk (Trace runs on the worker, possibly SCHED_FIFO).
const traceQueue = 4096

// TraceFile writes ReconcileTraces as JSON lines (times on the wall
// clock), so another process, a benchmark, can break its scale-ups down
// by where the controller spent them. Add never blocks: a trace that
// finds the queue full is counted in Dropped, not waited for.
type TraceFile struct {
	f       *os.File
	ch      chan ReconcileTrace
	done    chan struct{}
	dropped atomic.Int64
	once    sync.Once
	err     error
	// mu keeps Add off the channel once Close closed it: a reconcile of a
	// worker that outlived the engine's stop drops its trace.
	mu     sync.RWMutex
	closed bool
}

// OpenTraceFile creates (or truncates) path and starts its writer.
func OpenTraceFile(path string) (*TraceFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trace file: %w", err)
	}
	t := &TraceFile{f: f, ch: make(chan ReconcileTrace, traceQueue), done: make(chan struct{})}
	go t.write()
	return t, nil
}

// Add queues one trace; it is Options.Trace.
func (t *TraceFile) Add(tr ReconcileTrace) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		t.dropped.Add(1)
		return
	}
	select {
	case t.ch <- tr:
	default:
		t.dropped.Add(1)
	}
}

// Dropped is how many traces found the queue full.
func (t *TraceFile) Dropped() int64 { return t.dropped.Load() }

// write flushes after every trace the queue had: a reader tails the file
// while the controller runs.
func (t *TraceFile) write() {
	defer close(t.done)
	w := bufio.NewWriter(t.f)
	enc := json.NewEncoder(w)
	for tr := range t.ch {
		if err := enc.Encode(tr); err != nil && t.err == nil {
			t.err = err
		}
		if len(t.ch) == 0 {
			if err := w.Flush(); err != nil && t.err == nil {
				t.err = err
			}
		}
	}
	if err := w.Flush(); err != nil && t.err == nil {
		t.err = err
	}
}

// Close writes what is queued and closes the file; call it once Add can
// no longer be called.
func (t *TraceFile) Close() error {
	t.once.Do(func() {
		t.mu.Lock()
		t.closed = true
		close(t.ch)
		t.mu.Unlock()
		<-t.done
		if err := t.f.Close(); err != nil && t.err == nil {
			t.err = err
		}
	})
	return t.err
}
