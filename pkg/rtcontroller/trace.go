package rtcontroller

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// ReconcileTrace says where one reconcile that started a new generation
// (the processing mark, PREEMPT-FaaS's "starts processing") spent its
// time, on this process's monotonic clock:
//
//	Seen    the informer delivered the change (zero if this process did
//	        not see it, e.g. it arrived before a restart)
//	Start   a worker took the key: Start-Seen is the wait in the queue
//	Mark    the status write: its client rate limiter wait, then its HTTP
//	        round trip (connection, apiserver, response headers)
//	Creates the pod creates that followed, as one call for the last of
//	        them to return (the slowest is the stage's critical path)
//
// Whatever the calls do not account for between Start and End is CPU and
// scheduling in this process: the cache, the plan, encoding and decoding.
type ReconcileTrace struct {
	Namespace, Name string
	Criticality     int32
	Generation      int64
	Seen, Start     time.Time
	Mark            CallTrace
	// Creates is how many pods the reconcile created; Create is the last
	// of them to return (zero when none).
	Creates int
	Create  CallTrace
	End     time.Time
}

// CallTrace is one API call: Sent when the client method was called,
// Limiter spent waiting for the client's rate limiter, API in the HTTP
// round trip, Done when the method returned.
type CallTrace struct {
	Sent, Done   time.Time
	Limiter, API time.Duration
}

// callTiming collects one call's limiter and HTTP time through its
// context; parallel callers each get their own.
type callTiming struct {
	limiter, api atomic.Int64
}

type callTimingKey struct{}

func withCallTiming(ctx context.Context) (context.Context, *callTiming) {
	t := &callTiming{}
	return context.WithValue(ctx, callTimingKey{}, t), t
}

func callTimingFrom(ctx context.Context) *callTiming {
	t, _ := ctx.Value(callTimingKey{}).(*callTiming)
	return t
}

// timeCall runs one API call and traces it.
func timeCall(ctx context.Context, call func(context.Context) error) (CallTrace, error) {
	ctx, t := withCallTiming(ctx)
	ct := CallTrace{Sent: time.Now()}
	err := call(ctx)
	ct.Done = time.Now()
	ct.Limiter, ct.API = time.Duration(t.limiter.Load()), time.Duration(t.api.Load())
	return ct, err
}

// timedLimiter adds the wait of a traced request to its call's timing.
type timedLimiter struct{ flowcontrol.RateLimiter }

func (l timedLimiter) Wait(ctx context.Context) error {
	t := callTimingFrom(ctx)
	if t == nil {
		return l.RateLimiter.Wait(ctx)
	}
	start := time.Now()
	err := l.RateLimiter.Wait(ctx)
	t.limiter.Add(int64(time.Since(start)))
	return err
}

// timedTransport adds the HTTP round trip of a traced request to its
// call's timing.
type timedTransport struct{ next http.RoundTripper }

func (t timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ct := callTimingFrom(req.Context())
	if ct == nil {
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	ct.api.Add(int64(time.Since(start)))
	return resp, err
}

// reconcileTracer builds the trace of the reconcile in flight for a key.
type reconcileTracer struct {
	mu sync.Mutex
	tr ReconcileTrace
	// marked: the reconcile wrote a processing mark, so the trace is
	// reported when it ends.
	marked bool
}

type tracerKey struct{}

func tracerFrom(ctx context.Context) *reconcileTracer {
	t, _ := ctx.Value(tracerKey{}).(*reconcileTracer)
	return t
}

func (t *reconcileTracer) create(ct CallTrace) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tr.Creates++
	if ct.Done.After(t.tr.Create.Done) {
		t.tr.Create = ct
	}
}

// seenGenerations remembers when the informer delivered each key's latest
// generation, for the trace of the reconcile that marks it.
type seenGenerations struct {
	mu sync.Mutex
	m  map[Key]seenAt
}

type seenAt struct {
	gen int64
	at  time.Time
}

func (s *seenGenerations) record(k Key, gen int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[Key]seenAt{}
	}
	if prev, ok := s.m[k]; !ok || prev.gen != gen {
		s.m[k] = seenAt{gen, time.Now()}
	}
}

// take returns when generation gen of k was seen and forgets it.
func (s *seenGenerations) take(k Key, gen int64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.m[k]
	if !ok || at.gen != gen {
		return time.Time{}
	}
	delete(s.m, k)
	return at.at
}

func (s *seenGenerations) forget(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}
