package gateway

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/trace"
)

// BenchmarkGatewayOverhead measures the latency the gateway adds: the same
// open-loop load (1000 requests/s of a tiny body) straight to an instance
// and through the gateway, side by side in one run. The reported metrics are
// each path's p50 and p99 and the difference.
//
//	go test -run '^$' -bench GatewayOverhead -benchtime 1x ./pkg/gateway
func BenchmarkGatewayOverhead(b *testing.B) {
	const rate, seconds = 1000, 5
	g, _ := inprocGateway(b, plainFunction("f"))
	gw := httptest.NewServer(g)
	defer gw.Close()
	direct := httptest.NewServer(echoHandler)
	defer direct.Close()
	// Warm the instance and the connection pools.
	runLoad(b, gw.URL+"/function/f", rate, 1)
	for b.Loop() {
		d := runLoad(b, direct.URL+"/", rate, seconds)
		v := runLoad(b, gw.URL+"/function/f", rate, seconds)
		b.ReportMetric(ms(d.P50), "direct-p50-ms")
		b.ReportMetric(ms(d.P99), "direct-p99-ms")
		b.ReportMetric(ms(v.P50), "gateway-p50-ms")
		b.ReportMetric(ms(v.P99), "gateway-p99-ms")
		b.ReportMetric(ms(v.P99-d.P99), "added-p99-ms")
		b.ReportMetric(ms(v.P50-d.P50), "added-p50-ms")
	}
}

// BenchmarkSustained5000rps drives 5000 tiny requests per second through
// the gateway for 20 s and reports the heap in use at the end of the first
// and the last 5 s: flat memory means the two stay close. The generator,
// the gateway and the instance share one process here; `gantry bench
// gateway --sustain 5000` runs them as three.
//
//	go test -run '^$' -bench Sustained5000rps -benchtime 1x ./pkg/gateway
func BenchmarkSustained5000rps(b *testing.B) {
	// A tiny function serves many requests at once, as a Go handler does;
	// with one slot per instance the run would measure the policy's sizing
	// of thousands of instances instead of the gateway.
	f := plainFunction("f")
	f.Concurrency, f.MaxQueue = 64, 10000
	g, _ := inprocGateway(b, f)
	gw := httptest.NewServer(g)
	defer gw.Close()
	for b.Loop() {
		var heaps []float64
		var total, errs int64
		for range 4 {
			r := runLoad(b, gw.URL+"/function/f", 5000, 5)
			total += r.Requests
			errs += r.Errors
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			heaps = append(heaps, float64(m.HeapInuse)/(1<<20))
		}
		b.ReportMetric(float64(total)/20, "offered-rps")
		b.ReportMetric(float64(total-errs)/20, "completed-rps")
		b.ReportMetric(float64(errs), "errors")
		b.ReportMetric(float64(total), "requests")
		b.ReportMetric(heaps[0], "heap-MiB-at-5s")
		b.ReportMetric(heaps[len(heaps)-1], "heap-MiB-at-20s")
	}
}

func runLoad(b testing.TB, url string, rate float64, seconds int) *loadgen.Result {
	b.Helper()
	tr, err := trace.Generate("poisson", rate, time.Duration(seconds)*time.Second, 1)
	if err != nil {
		b.Fatal(err)
	}
	res, err := loadgen.Run(context.Background(), loadgen.Config{URL: url, Method: http.MethodPost, Trace: tr,
		SLO: time.Second, Seed: 1, MaxInFlight: 512})
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// BenchmarkInvoke is one invocation through the gateway's handler, closed
// loop, against an in-process instance over loopback: the gateway's own
// CPU and allocations per request (the instance's and the client's are in
// the figures too, alike before and after a change).
//
//	go test -run '^$' -bench 'Invoke$' -benchmem ./pkg/gateway
func BenchmarkInvoke(b *testing.B) {
	f := plainFunction("f")
	f.Concurrency, f.MaxQueue = 64, 10000
	g, _ := inprocGateway(b, f)
	body := bytes.Repeat([]byte("x"), 64)
	// One warm request so the instance exists.
	warm := httptest.NewRecorder()
	g.ServeHTTP(warm, httptest.NewRequest(http.MethodPost, "/function/f", bytes.NewReader(body)))
	if warm.Code != http.StatusOK {
		b.Fatalf("warm-up: HTTP %d %s", warm.Code, warm.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/function/f", bytes.NewReader(body)))
			if rec.Code != http.StatusOK {
				b.Errorf("HTTP %d", rec.Code)
				return
			}
		}
	})
}
