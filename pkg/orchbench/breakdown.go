package orchbench

import (
	"sync"
	"time"

	"gantry.dev/gantry/pkg/rtcontroller"
)

// The parts of a Gantry scale-up, in the order they happen, from the
// scale patch's return (t0) to the benchmark's watch seeing pods created.
// They come from the in-process controller's rtcontroller.ReconcileTrace
// of the reconcile that marked the new generation, on the same monotonic
// clock as the stages.
var Components = []string{
	"watch_to_controller", // t0 until the controller's informer delivered the change (0 if before t0)
	"queue",               // delivered until a worker took the key
	"before_mark",         // taken until the status write was called: cache, plan, CPU
	"mark_limiter",        // the status write's wait for the client rate limiter
	"mark_apiserver",      // its HTTP round trip: connection, APF, apiserver, etcd
	"mark_client",         // the rest of the call: encoding, decoding, goroutine hand-offs
	"mark_to_watch",       // the write's return until the benchmark's watch saw it
	"mark_to_create",      // the write's return until the pod create was called
	"create_limiter",      // the create's wait for the client rate limiter
	"create_apiserver",    // its HTTP round trip
	"create_client",       // the rest of the call
	"create_to_watch",     // the create's return until the benchmark's watch saw the pod
}

// traceStore keeps the controller's traces until the benchmark's cycle
// that caused them picks them up.
type traceStore struct {
	mu sync.Mutex
	m  map[traceKey]rtcontroller.ReconcileTrace
}

type traceKey struct {
	ns, name string
	gen      int64
}

func newTraceStore() *traceStore { return &traceStore{m: map[traceKey]rtcontroller.ReconcileTrace{}} }

func (s *traceStore) add(tr rtcontroller.ReconcileTrace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[traceKey{tr.Namespace, tr.Name, tr.Generation}] = tr
}

// take waits up to wait for the trace of one generation (the reconcile
// reports it when it ends, which can be after the benchmark saw its pods)
// and removes it.
func (s *traceStore) take(ns, name string, gen int64, wait time.Duration) (rtcontroller.ReconcileTrace, bool) {
	deadline := time.Now().Add(wait)
	for {
		s.mu.Lock()
		tr, ok := s.m[traceKey{ns, name, gen}]
		if ok {
			delete(s.m, traceKey{ns, name, gen})
		}
		s.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return tr, ok
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clear drops traces nobody took (scale-downs, interference).
func (s *traceStore) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.m)
}

// breakdown splits one scale-up by Components, in ms; a part whose ends
// are unknown is left out.
func breakdown(tr rtcontroller.ReconcileTrace, t0 time.Time, seen [numStages]time.Time) map[string]float64 {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	span := func(from, to time.Time) (float64, bool) {
		if from.IsZero() || to.IsZero() {
			return 0, false
		}
		return max(0, ms(to.Sub(from))), true
	}
	out := map[string]float64{}
	put := func(name string, v float64, ok bool) {
		if ok {
			out[name] = v
		}
	}
	seenAt := tr.Seen
	if !seenAt.IsZero() && seenAt.Before(t0) {
		seenAt = t0 // delivered before the patch's response was read
	}
	v, ok := span(t0, seenAt)
	put("watch_to_controller", v, ok)
	v, ok = span(seenAt, tr.Start)
	put("queue", v, ok)
	v, ok = span(tr.Start, tr.Mark.Sent)
	put("before_mark", v, ok)
	put("mark_limiter", ms(tr.Mark.Limiter), true)
	put("mark_apiserver", ms(tr.Mark.API), true)
	put("mark_client", max(0, ms(tr.Mark.Done.Sub(tr.Mark.Sent)-tr.Mark.Limiter-tr.Mark.API)), true)
	v, ok = span(tr.Mark.Done, seen[StartsProcessing])
	put("mark_to_watch", v, ok)
	if tr.Creates > 0 {
		v, ok = span(tr.Mark.Done, tr.Create.Sent)
		put("mark_to_create", v, ok)
		put("create_limiter", ms(tr.Create.Limiter), true)
		put("create_apiserver", ms(tr.Create.API), true)
		put("create_client", max(0, ms(tr.Create.Done.Sub(tr.Create.Sent)-tr.Create.Limiter-tr.Create.API)), true)
		v, ok = span(tr.Create.Done, seen[PodsCreated])
		put("create_to_watch", v, ok)
	}
	return out
}
