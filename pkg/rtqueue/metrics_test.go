package rtqueue

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsTrackDepthAndWaitPerBand(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := newTestQueue(t, Config[string]{Name: "m", Registerer: reg})
	q.AddWithPriority("a", 10)
	q.AddWithPriority("b", 90)
	q.AddWithPriority("c", 91)
	depth := func(priority int) float64 { return testutil.ToFloat64(q.metrics.depth[bandOf(priority)]) }
	if depth(0) != 1 || depth(99) != 2 {
		t.Fatalf("depth low=%v critical=%v, want 1 and 2", depth(0), depth(99))
	}
	item, _ := mustGet(t, q)
	q.Done(item)
	if depth(99) != 1 {
		t.Fatalf("critical depth after one Get = %v, want 1", depth(99))
	}
	if n := testutil.CollectAndCount(reg, "gantry_rtqueue_wait_seconds"); n != numBands {
		t.Fatalf("%d wait histograms, want one per band (%d)", n, numBands)
	}
	// A second queue with the same name reuses the collectors instead of
	// failing registration.
	q2 := newTestQueue(t, Config[string]{Name: "m", Registerer: reg})
	q2.AddWithPriority("z", 10)
	if depth(0) != 2 {
		t.Fatalf("shared depth = %v, want 2", depth(0))
	}
}
