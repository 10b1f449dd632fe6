package orchbench

import (
	"encoding/json"
	"testing"
	"time"
)

var grid0 = time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)

func TestGridPhaseIsTheTimeSinceTheSlotStarted(t *testing.T) {
	every := 10 * time.Second
	for _, c := range []struct {
		at   time.Duration
		want time.Duration
	}{{0, 0}, {2500 * time.Millisecond, 2500 * time.Millisecond}, {10 * time.Second, 0}, {23 * time.Second, 3 * time.Second}, {-time.Second, 9 * time.Second}} {
		if got := gridPhase(grid0.Add(c.at), grid0, every); got != c.want {
			t.Errorf("phase of %v: %v, want %v", c.at, got, c.want)
		}
	}
	if got := gridPhase(grid0.Add(time.Second), grid0, 0); got != 0 {
		t.Errorf("no grid: %v, want 0", got)
	}
}

func TestBurstBusyOnlyWhileItsSlotsPodsAreCreated(t *testing.T) {
	every := 10 * time.Second
	creates := []time.Time{grid0.Add(300 * time.Millisecond), grid0.Add(1200 * time.Millisecond), grid0.Add(10400 * time.Millisecond)}
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{
		{500 * time.Millisecond, true},    // a create of its slot comes after
		{2 * time.Second, false},          // the slot's last create is done
		{9900 * time.Millisecond, false},  // the next slot's create does not count
		{10100 * time.Millisecond, true},  // the next slot's own burst
		{10500 * time.Millisecond, false}, // after it
	} {
		if got := burstBusy(grid0.Add(c.at), grid0, every, creates); got != c.want {
			t.Errorf("busy at %v: %v, want %v", c.at, got, c.want)
		}
	}
	if got := slotAbsorbed(grid0, every, creates); len(got) != 2 || got[0] != 400*time.Millisecond || got[1] != 1200*time.Millisecond {
		t.Errorf("absorbed %v, want [400ms 1.2s]", got)
	}
}

func TestTrafficAtBurstStartsOnTheGrid(t *testing.T) {
	every := 10 * time.Second
	for _, c := range []struct {
		warmup time.Duration
		at     bool
		want   time.Duration
	}{{2 * time.Second, false, 2 * time.Second}, {2 * time.Second, true, 10 * time.Second}, {0, true, 0}, {10 * time.Second, true, 10 * time.Second}, {11 * time.Second, true, 20 * time.Second}} {
		if got := trafficStart(c.warmup, every, c.at, 0); got != c.want {
			t.Errorf("warm-up %v at burst %v: %v, want %v", c.warmup, c.at, got, c.want)
		}
	}
	if got := trafficStart(3*time.Second, 0, true, 0); got != 3*time.Second {
		t.Errorf("no grid: %v, want the warm-up", got)
	}
	// A lead starts the traffic before the burst, never before the warm-up.
	for _, c := range []struct{ warmup, lead, want time.Duration }{
		{2 * time.Second, 2 * time.Second, 8 * time.Second},
		{2 * time.Second, 9 * time.Second, 11 * time.Second},
		{0, 2 * time.Second, 8 * time.Second},
	} {
		if got := trafficStart(c.warmup, every, true, c.lead); got != c.want {
			t.Errorf("warm-up %v lead %v: %v, want %v", c.warmup, c.lead, got, c.want)
		}
	}
	if got := trafficStart(2*time.Second, every, false, 2*time.Second); got != 2*time.Second {
		t.Errorf("a lead without --traffic-at-burst moved the traffic to %v", got)
	}
}

func TestTrafficAtBurstMustStartWithinTheIteration(t *testing.T) {
	o := DefaultOptions()
	o.Knative, o.KN = true, DefaultKnativeOptions()
	o = o.KnativeQuick()
	o.KN.TrafficAtBurst = true
	if err := o.validateKnative(); err != nil {
		t.Fatalf("quick with --traffic-at-burst: %v", err)
	}
	o.Iteration = 10 * time.Second
	if err := o.validateKnative(); err == nil {
		t.Fatal("traffic at 10 s in a 10 s iteration accepted")
	}
	o.Iteration, o.KN.TrafficAtBurst, o.KN.TrafficLead = 30*time.Second, false, time.Second
	if err := o.validateKnative(); err == nil {
		t.Fatal("a traffic lead without --traffic-at-burst accepted")
	}
}

// parseAuditLine parses one audit log line as the reader does.
func parseAuditLine(t *testing.T, line string) auditEvent {
	t.Helper()
	var e auditEvent
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestAuditFloorJoinsTheAnswerToItsTrigger(t *testing.T) {
	trig := &knTrigger{rev: "r", target: "r-deployment", gen: 3, at: grid0.Add(time.Second)}
	scale := parseAuditLine(t, `{"verb":"patch","objectRef":{"resource":"deployments","name":"r-deployment","subresource":"scale"},
		"requestReceivedTimestamp":"2026-12-03T07:00:00.000000Z","stageTimestamp":"2026-12-03T07:00:00.100000Z"}`)
	answer := func(key, received string) auditEvent {
		return parseAuditLine(t, `{"verb":"patch","objectRef":{"resource":"configmaps","name":"`+floorConfigMap(1)+`"},
			"requestObject":{"metadata":{"annotations":{"`+floorAnnotation+`":"`+key+`"}}},
			"requestReceivedTimestamp":"2026-12-03T07:00:00.`+received+`Z","stageTimestamp":"2026-12-03T07:00:00.900000Z"}`)
	}
	events := []auditEvent{scale, answer("r-deployment/2", "150000"), answer("r-deployment/3", "180000")}
	got, ok := auditFloor(events, trig)
	if !ok || got != 80 {
		t.Fatalf("floor %v %v, want 80 ms (the generation-3 answer's reception after the write's completion)", got, ok)
	}
	if _, ok := auditFloor(events[:2], trig); ok {
		t.Fatal("a floor from another trigger's answer")
	}
}

func TestFloorStatsAllowedReduction(t *testing.T) {
	p50, p90, allowed := floorStats([]float64{10, 20, 30, 40, 50}, 200)
	if p50 != 30 || p90 != 46 || allowed == nil || *allowed != 0.85 {
		t.Fatalf("p50 %v p90 %v allowed %v, want 30, 46, 0.85", p50, p90, allowed)
	}
	if _, _, allowed := floorStats([]float64{10}, 0); allowed != nil {
		t.Fatal("an allowed reduction without vanilla's median")
	}
	if p50, _, allowed := floorStats(nil, 200); p50 != 0 || allowed != nil {
		t.Fatal("a floor from no samples")
	}
}

func TestFloorCostIsTheConfigMapPatchesShare(t *testing.T) {
	d := func(verb, resource string, count, sum float64) *metricDelta {
		return &metricDelta{family: "apiserver_request_duration_seconds", labels: map[string]string{"verb": verb, "resource": resource}, count: count, sum: sum}
	}
	deltas := map[string]*metricDelta{
		"a": d("PATCH", "configmaps", 10, 1),
		"b": d("PUT", "pods", 90, 9),
		"c": d("WATCH", "pods", 1000, 5000), // long-lived: not a request's time
		"d": {family: "etcd_request_duration_seconds", labels: map[string]string{"verb": "PATCH"}, count: 50, sum: 50},
	}
	req, tm := floorCost(deltas)
	if req != 0.1 || tm != 0.1 {
		t.Fatalf("shares %v %v, want 0.1 and 0.1", req, tm)
	}
	if req, tm := floorCost(nil); req != 0 || tm != 0 {
		t.Fatal("a share of nothing")
	}
}
