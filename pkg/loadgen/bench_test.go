package loadgen

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// roundTripFunc answers in-process, so the benchmark measures the
// generator's own work per request: payload, request, goroutine, collector.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func instantClient() *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})}
}

// BenchmarkDispatch is the client-side cost of one request, end to end,
// without a network: it bounds the rate one core can generate.
func BenchmarkDispatch(b *testing.B) {
	cfg := Config{URL: "http://127.0.0.1:1/function/f", Trace: flat(1, 1), SLO: time.Second,
		Client: instantClient(), MinSize: 1, MaxSize: 8, MaxInFlight: MaxInFlightLimit}.withDefaults()
	r := newRunner(cfg, nil)
	r.start = time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.dispatch(arrival{offset: time.Duration(i), size: 4, seed: uint64(i)})
	}
	r.wg.Wait()
	b.StopTimer()
	if r.col.requests != r.sent.Load() {
		b.Fatalf("collected %d of %d", r.col.requests, r.sent.Load())
	}
}

// BenchmarkSchedule is the cost of drawing one arrival and its size.
func BenchmarkSchedule(b *testing.B) {
	s := newSchedule(Config{Trace: flat(1e9, 3600), MinSize: 1, MaxSize: 8}.withDefaults())
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.next(); !ok {
			b.Fatal("schedule ran out")
		}
	}
}

// BenchmarkRunInstant runs a whole short trace against the in-process
// client; ns/op is per run, and the reported req/s is what was sent.
func BenchmarkRunInstant(b *testing.B) {
	for b.Loop() {
		res, err := Run(context.Background(), Config{URL: "http://127.0.0.1:1/f", Trace: flat(20000, 1),
			SLO: time.Second, Client: instantClient()})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Requests)/res.Duration.Seconds(), "req/s")
	}
}
