package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// sleepHandler runs for the X-Sleep duration the client asks for.
var sleepHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		return
	}
	d, _ := time.ParseDuration(r.Header.Get("X-Sleep"))
	time.Sleep(d)
	_, _ = w.Write([]byte("done"))
})

// criticalWithinSLO floods a machine of 4 instances with a low-criticality
// function and returns the share of a critical function's requests that
// finish within its SLO.
func criticalWithinSLO(t *testing.T, lowCrit, highCrit int) float64 {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{Capacity: 4, Tick: 20 * time.Millisecond}, newInproc(sleepHandler))
	if err != nil {
		t.Fatal(err)
	}
	low, high := plainFunction("batch"), plainFunction("checkout")
	low.Criticality, low.MaxQueue, low.SLO = lowCrit, 10000, 200*time.Millisecond
	high.Criticality, high.SLO = highCrit, 300*time.Millisecond
	for _, f := range []stack.Function{low, high} {
		if err := d.Deploy(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	go d.Run(ctx)
	srv := httptest.NewServer(New(Config{Dispatcher: d}))
	defer func() { stop(); srv.Close(); _ = d.Close(context.Background()) }()

	var flooding sync.WaitGroup
	for range 32 {
		flooding.Add(1)
		go func() {
			defer flooding.Done()
			for ctx.Err() == nil {
				post(ctx, srv.URL+"/function/batch", "50ms", time.Minute)
			}
		}()
	}
	waitUntil(t, "the flood holds the machine", func() bool { return d.Live() == 4 })
	var within atomic.Int64
	const n = 10
	for range n {
		start := time.Now()
		if post(context.Background(), srv.URL+"/function/checkout", "5ms", 2*high.SLO) && time.Since(start) <= high.SLO {
			within.Add(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	flooding.Wait()
	return float64(within.Load()) / n
}

func post(ctx context.Context, url, sleep string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader("x"))
	req.Header.Set("X-Sleep", sleep)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// A critical function keeps its SLO while a low-criticality function floods
// the same machine: its scale-up drains a low instance and takes the room.
// With equal criticality nothing yields, and the critical requests wait
// behind the flood: that is what criticality buys.
func TestCriticalFunctionKeepsItsSLOUnderAFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a flood for a few seconds")
	}
	with := criticalWithinSLO(t, 1, 9)
	without := criticalWithinSLO(t, 5, 5)
	t.Logf("critical requests within SLO: %.0f%% with criticality, %.0f%% without", 100*with, 100*without)
	if with < 0.9 {
		t.Errorf("with criticality only %.0f%% within SLO, want at least 90%%", 100*with)
	}
	if without > 0.5 {
		t.Errorf("without criticality %.0f%% within SLO: the flood should have starved it", 100*without)
	}
}
