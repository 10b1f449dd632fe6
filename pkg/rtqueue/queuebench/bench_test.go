package queuebench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"
)

// BenchmarkQueue is the go test twin of `gantry bench queue`: one
// sub-benchmark per scenario and queue, each a 3s case (longer than the
// default -benchtime, so b.N stays 1), reporting the case's figures.
func BenchmarkQueue(b *testing.B) {
	for _, s := range Scenarios {
		for _, q := range Queues {
			b.Run(s+"/"+q, func(b *testing.B) {
				var r Result
				for range b.N {
					r = RunCase(context.Background(), q, s, Options{Duration: 3 * time.Second})
				}
				b.ReportMetric(r.P50us, "p50_us")
				b.ReportMetric(r.P99us, "p99_us")
				b.ReportMetric(r.MaxUs, "max_us")
				b.ReportMetric(r.BackgroundPerS, "background/s")
			})
		}
	}
}

func TestJSONHasExactlyTheIssueFields(t *testing.T) {
	rep := Report{Results: []Result{{Queue: "gantry", Scenario: "mixed", P50us: 1, P99us: 2, MaxUs: 3,
		BackgroundPerS: 4, Critical: 5, LagP99us: 6, Procs: 7, Policy: "SCHED_FIFO"}}}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string][]map[string]any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range decoded["results"][0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"background_per_s", "max_us", "p50_us", "p99_us", "queue", "scenario"}
	if !reflect.DeepEqual(keys, want) || len(decoded) != 1 {
		t.Fatalf("JSON = %s, want one key results with fields %v", raw, want)
	}
}

func TestValidateRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Duration: time.Millisecond},
		{Queues: []string{"nope"}},
		{Scenarios: []string{"idle"}},
		{Backlog: -1},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", o)
		}
	}
	if err := (Options{Queues: []string{"x"}}).Validate(); !errors.Is(err, ErrUnknownName) {
		t.Errorf("unknown queue: %v, want ErrUnknownName", err)
	}
}

// TestEveryCaseMeasuresCriticalItems runs each queue briefly on light
// background work and checks the measurements are real: critical items
// were timed, background items completed, percentiles are ordered.
func TestEveryCaseMeasuresCriticalItems(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every case for a fraction of a second")
	}
	opts := Options{Duration: 400 * time.Millisecond, ItemWork: 2 * time.Millisecond, Backlog: 10, Scenarios: []string{ScenarioMixed}}
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(Queues) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(Queues))
	}
	for _, r := range rep.Results {
		if r.Critical == 0 || r.BackgroundPerS <= 0 {
			t.Errorf("%s: %d critical items, %.1f background/s; want both > 0", r.Queue, r.Critical, r.BackgroundPerS)
		}
		if !(r.P50us <= r.P99us && r.P99us <= r.MaxUs) {
			t.Errorf("%s: p50 %.0f, p99 %.0f, max %.0f not ordered", r.Queue, r.P50us, r.P99us, r.MaxUs)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil || !bytes.Contains(buf.Bytes(), []byte("gantry-nort")) {
		t.Fatalf("table missing rows: %v\n%s", err, buf.String())
	}
}

func TestCalibrationIsPlausible(t *testing.T) {
	calibrateOnce.Do(calibrate)
	if itersPerMs < 1000 {
		t.Fatalf("calibrated %d iterations per ms; the spin loop cannot be that slow", itersPerMs)
	}
}

// TestUnstartedCriticalItemsStillCount: a queue so slow that a critical
// item never starts must not look fast by losing that sample.
func TestUnstartedCriticalItemsStillCount(t *testing.T) {
	c := newCaseRun(ScenarioMixed, Options{}.withDefaults())
	c.pending.Store(1)
	c.enq[3].Store(time.Now().Add(-2 * time.Second).UnixNano())
	c.awaitPending(context.Background(), 20*time.Millisecond)
	r := c.result(time.Second, time.Second)
	if r.Critical != 1 || r.MaxUs < 2e6 {
		t.Fatalf("censored item: %d samples, max %.0fus; want 1 sample of at least 2s", r.Critical, r.MaxUs)
	}
}
