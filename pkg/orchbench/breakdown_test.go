package orchbench

import (
	"testing"
	"time"

	"gantry.dev/gantry/pkg/rtcontroller"
)

func TestBreakdownSplitsAScaleUpInOrder(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := rtcontroller.ReconcileTrace{
		Seen: at(5), Start: at(7),
		Mark:    rtcontroller.CallTrace{Sent: at(8), Limiter: 10 * time.Millisecond, API: 30 * time.Millisecond, Done: at(50)},
		Creates: 1,
		Create:  rtcontroller.CallTrace{Sent: at(51), Limiter: 0, API: 40 * time.Millisecond, Done: at(92)},
	}
	var seen [numStages]time.Time
	seen[StartsProcessing], seen[PodsCreated] = at(53), at(100)
	got := breakdown(tr, t0, seen)
	want := map[string]float64{
		"watch_to_controller": 5, "queue": 2, "before_mark": 1,
		"mark_limiter": 10, "mark_apiserver": 30, "mark_client": 2, "mark_to_watch": 3,
		"mark_to_create": 1, "create_limiter": 0, "create_apiserver": 40, "create_client": 1, "create_to_watch": 8,
	}
	for k, v := range want {
		if d := got[k] - v; d > 0.01 || d < -0.01 {
			t.Errorf("%s = %.3f ms, want %.0f", k, got[k], v)
		}
	}
	if len(got) != len(Components) {
		t.Errorf("%d parts, want every one of %v", len(got), Components)
	}
	// the parts up to the mark's return add up to starts processing's
	// time less the watch delivery to the benchmark
	sum := 0.0
	for _, k := range []string{"watch_to_controller", "queue", "before_mark", "mark_limiter", "mark_apiserver", "mark_client", "mark_to_watch"} {
		sum += got[k]
	}
	if sum < 52.99 || sum > 53.01 {
		t.Errorf("parts to starts processing add to %.2f ms, want 53", sum)
	}
}

func TestBreakdownLeavesOutUnknownParts(t *testing.T) {
	t0 := time.Now()
	tr := rtcontroller.ReconcileTrace{Start: t0, Mark: rtcontroller.CallTrace{Sent: t0, Done: t0}} // not seen by this informer, no creates
	got := breakdown(tr, t0, [numStages]time.Time{})
	for _, k := range []string{"watch_to_controller", "queue", "mark_to_watch", "create_apiserver"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s reported without its ends known", k)
		}
	}
}

func TestTraceStoreHandsEachTraceOutOnce(t *testing.T) {
	s := newTraceStore()
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.add(rtcontroller.ReconcileTrace{Namespace: "ns", Name: "svc", Generation: 3})
	}()
	if _, ok := s.take("ns", "svc", 3, 2*time.Second); !ok {
		t.Fatal("trace reported after the take began was not found")
	}
	if _, ok := s.take("ns", "svc", 3, 0); ok {
		t.Fatal("a trace was handed out twice")
	}
}
