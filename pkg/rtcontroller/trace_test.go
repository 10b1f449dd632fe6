package rtcontroller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/rest"
)

// fakeAPIServer answers pod creates after delay and anything else at once.
func fakeAPIServer(t *testing.T, delay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pods") {
			time.Sleep(delay)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"svc-x","namespace":"ns"}}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTraceSplitsACallIntoLimiterAndRoundTrip creates two pods through
// the controller's own client, rate-limited to 2 qps with a burst of 1,
// against a server that takes 30 ms: the second create waits for its
// token about 500 ms minus the first's round trip, and each round trip is
// at least 30 ms. The trace keeps the last create.
func TestTraceSplitsACallIntoLimiterAndRoundTrip(t *testing.T) {
	const rtt = 30 * time.Millisecond
	srv := fakeAPIServer(t, rtt)
	c, err := New(Options{Config: &rest.Config{Host: srv.URL}, Engine: NewFIFOEngine(1), QPS: 2, Burst: 1,
		Trace: func(ReconcileTrace) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.shutdown()
	tracer := &reconcileTracer{}
	ctx := context.WithValue(context.Background(), tracerKey{}, tracer)
	rt := testRT(2)
	for range 2 {
		if err := c.createPod(ctx, rt, "h"); err != nil {
			t.Fatal(err)
		}
	}
	tr := tracer.tr
	if tr.Creates != 2 {
		t.Fatalf("%d creates traced, want 2", tr.Creates)
	}
	ct := tr.Create
	if ct.API < rtt || ct.Limiter < 200*time.Millisecond || ct.Limiter > 2*time.Second {
		t.Errorf("last create: limiter %v (want about 470ms), round trip %v (want >= %v)", ct.Limiter, ct.API, rtt)
	}
	if total := ct.Done.Sub(ct.Sent); total < ct.Limiter+ct.API {
		t.Errorf("call took %v, less than its limiter %v plus round trip %v", total, ct.Limiter, ct.API)
	}
}

// TestUntracedCallsAreNotTimed: without a tracer in the context nothing
// is collected, so the hot path pays one context lookup.
func TestUntracedCallsAreNotTimed(t *testing.T) {
	srv := fakeAPIServer(t, 0)
	c, err := New(Options{Config: &rest.Config{Host: srv.URL}, Engine: NewFIFOEngine(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.shutdown()
	if err := c.createPod(context.Background(), testRT(1), "h"); err != nil {
		t.Fatal(err)
	}
	var nilTracer *reconcileTracer
	nilTracer.create(CallTrace{}) // must not panic
}

func TestSeenGenerationsKeepTheFirstArrivalOfEachGeneration(t *testing.T) {
	var s seenGenerations
	k := Key{Namespace: "ns", Name: "svc"}
	s.record(k, 2)
	// Backdated rather than slept past, so the later record's time differs.
	first := s.m[k].at.Add(-time.Hour)
	s.m[k] = seenAt{2, first}
	s.record(k, 2) // a later event of the same generation
	if got := s.take(k, 2); !got.Equal(first) {
		t.Errorf("take = %v, want the first arrival %v", got, first)
	}
	if got := s.take(k, 2); !got.IsZero() {
		t.Errorf("second take = %v, want zero (taken once)", got)
	}
	s.record(k, 3)
	if got := s.take(k, 2); !got.IsZero() {
		t.Errorf("take of an older generation = %v, want zero", got)
	}
	s.forget(k)
	if len(s.m) != 0 {
		t.Errorf("forget left %v", s.m)
	}
}

// TestParallelRunsTheFirstCallOnTheCallingThread: a reconcile's single
// pod create (and the first of a batch) runs on the worker's own thread,
// which under rtqueue is locked and real time; the rest run concurrently.
func TestParallelRunsTheFirstCallOnTheCallingThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self := unix.Gettid()
	var mu sync.Mutex
	tids := map[int]int{}
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(3)
	errs := parallel(3, func(i int) error {
		mu.Lock()
		tids[i] = unix.Gettid()
		mu.Unlock()
		started.Done()
		if i == 0 {
			started.Wait() // the others run meanwhile: still concurrent
			close(release)
		}
		<-release
		return nil
	})
	if len(errs) != 3 {
		t.Fatalf("%d errors, want 3", len(errs))
	}
	if tids[0] != self {
		t.Errorf("f(0) ran on thread %d, want the caller's %d", tids[0], self)
	}
}

func TestPlainLimiterAblation(t *testing.T) {
	for _, plain := range []bool{false, true} {
		c, err := New(Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}, Engine: NewFIFOEngine(1), PlainLimiter: plain})
		if err != nil {
			t.Fatal(err)
		}
		_, isPriority := c.limiter.(*PriorityLimiter)
		if isPriority == plain {
			t.Errorf("PlainLimiter %v: reconcile limiter %T", plain, c.limiter)
		}
		c.shutdown()
	}
}
