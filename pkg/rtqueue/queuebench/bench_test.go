package queuebench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkQueue is the go test twin of `gantry bench queue`: one
// sub-benchmark per scenario and queue at the default 5 workers, every
// queue at GOMAXPROCS NumCPU+5, each a 3s case (longer than the default
// -benchtime, so b.N stays 1), reporting the case's figures.
func BenchmarkQueue(b *testing.B) {
	procs := runtime.NumCPU() + DefaultWorkers
	for _, s := range Scenarios {
		for _, q := range Queues {
			b.Run(s+"/"+q, func(b *testing.B) {
				var r Result
				for range b.N {
					r = RunCase(context.Background(), Case{Queue: q, Scenario: s, Workers: DefaultWorkers, GOMAXPROCS: procs},
						Options{Duration: 3 * time.Second})
				}
				b.ReportMetric(r.P50us, "p50_us")
				b.ReportMetric(r.P99us, "p99_us")
				b.ReportMetric(r.MaxUs, "max_us")
				b.ReportMetric(r.DoneP99us, "done_p99_us")
				b.ReportMetric(r.BackgroundPerS, "background/s")
			})
		}
	}
}

func TestJSONFields(t *testing.T) {
	rep := Report{Results: []Result{{Queue: "gantry", Scenario: "mixed", Workers: 5, GOMAXPROCS: 7, P50us: 1, P99us: 2, MaxUs: 3,
		DoneP50us: 4, DoneP99us: 5, BackgroundPerS: 4, Critical: 5, LagP99us: 6, Policy: "SCHED_FIFO"}},
		Shares: Shares(nil)}
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
	want := []string{"background_per_s", "done_p50_us", "done_p99_us", "gomaxprocs", "max_us", "p50_us", "p99_us", "queue", "scenario", "workers"}
	if !reflect.DeepEqual(keys, want) || len(decoded) != 2 || decoded["shares"] == nil {
		t.Fatalf("JSON = %s, want results with fields %v and a shares list", raw, want)
	}
}

func TestValidateRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Duration: time.Millisecond},
		{Queues: []string{"nope"}},
		{Scenarios: []string{"idle"}},
		{Backlog: -1},
		{CriticalWork: -time.Millisecond},
		{Workers: []int{1}},             // no room beside the reserve
		{Workers: []int{3}, Reserve: 3}, // reserve takes every worker
		{GOMAXPROCS: []int{0}},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", o)
		}
	}
	if err := (Options{Queues: []string{"x"}}).Validate(); !errors.Is(err, ErrUnknownName) {
		t.Errorf("unknown queue: %v, want ErrUnknownName", err)
	}
}

// TestEveryQueueRunsExactlyItsWorkers is the fairness rule: given w
// workers, no queue ever runs more than w items at once, and with
// critical and background items waiting each uses all w (the gantry
// variants with a reserve included: their reserve takes the critical
// items). Before this, the gantry rows ran the engine's default pool of
// 10 to 20 workers against the baselines' 5.
func TestEveryQueueRunsExactlyItsWorkers(t *testing.T) {
	const workers = 4
	for _, q := range Queues {
		t.Run(q, func(t *testing.T) {
			e := newEngine(q, workers, 1)
			var running, peak atomic.Int64
			release := make(chan struct{})
			var started sync.WaitGroup
			started.Add(workers)
			var once [workers]sync.Once
			e.start(func(k key) {
				n := running.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				if n <= workers {
					once[n-1].Do(started.Done)
				}
				<-release
				running.Add(-1)
			})
			for i := range 20 {
				e.add(key{id: uint64(i)})
			}
			// more critical items than workers, so a reserve worker that
			// starts after the general ones still finds one
			for i := range workers + 1 {
				e.add(key{critical: true, id: uint64(i)})
			}
			waited := make(chan struct{})
			go func() { started.Wait(); close(waited) }()
			select {
			case <-waited:
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d items ran at once, want %d", peak.Load(), workers)
			}
			time.Sleep(50 * time.Millisecond) // a fifth worker would start now
			if p := peak.Load(); p != workers {
				t.Errorf("%d items ran at once, want exactly %d", p, workers)
			}
			close(release)
			e.stop()
		})
	}
}

func TestGantryVariantsSwitchOneMechanismEach(t *testing.T) {
	cases := map[string]struct {
		reserve  int
		realTime bool
		noop     bool
	}{
		QueueGantryOrder:   {reserve: 0, noop: true},
		QueueGantryReserve: {reserve: 2, noop: true},
		QueueGantryNoRT:    {reserve: 2},
		QueueGantry:        {reserve: 2, realTime: true},
	}
	for q, want := range cases {
		g, ok := newEngine(q, 6, 2).(*gantry)
		if !ok {
			t.Fatalf("%s is not a gantry engine", q)
		}
		_, noop := g.cfg.Scheduler.(noopScheduler)
		if g.cfg.Min != 6 || g.cfg.Max != 6 || g.cfg.Reserve != want.reserve || g.cfg.RealTime != want.realTime || noop != want.noop {
			t.Errorf("%s: pool %d..%d, reserve %d, real time %v, threads untouched %v; want 6..6, %d, %v, %v",
				q, g.cfg.Min, g.cfg.Max, g.cfg.Reserve, g.cfg.RealTime, noop, want.reserve, want.realTime, want.noop)
		}
	}
}

// TestEveryCaseMeasuresCriticalItems runs each queue briefly on light
// background work and checks the measurements are real: critical items
// were timed and did their work, background items completed, percentiles
// are ordered, and every queue ran at the GOMAXPROCS asked for.
func TestEveryCaseMeasuresCriticalItems(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every case for a fraction of a second")
	}
	work := 2 * time.Millisecond
	opts := Options{Duration: 400 * time.Millisecond, ItemWork: 2 * time.Millisecond, CriticalWork: work, Backlog: 10,
		Workers: []int{3}, GOMAXPROCS: []int{4}, Scenarios: []string{ScenarioMixed}}
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
		if r.DoneP50us < float64(work/time.Microsecond) || r.DoneP50us < r.P50us {
			t.Errorf("%s: done p50 %.0fus, start p50 %.0fus; a critical item's %v of work must lie between", r.Queue, r.DoneP50us, r.P50us, work)
		}
		if r.Workers != 3 || r.GOMAXPROCS != 4 {
			t.Errorf("%s ran at %d workers, GOMAXPROCS %d; want 3 and 4", r.Queue, r.Workers, r.GOMAXPROCS)
		}
	}
	if len(rep.Shares) != len(shareMetrics) {
		t.Errorf("%d shares, want one per metric (%d)", len(rep.Shares), len(shareMetrics))
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil || !bytes.Contains(buf.Bytes(), []byte("gantry-reserve")) || !bytes.Contains(buf.Bytes(), []byte("real_time")) {
		t.Fatalf("table missing rows: %v\n%s", err, buf.String())
	}
}

func TestDefaultGOMAXPROCSAreNumCPUAndOnePerWorker(t *testing.T) {
	n := runtime.NumCPU()
	if got := (Options{}).withDefaults().procsFor(5); !reflect.DeepEqual(got, []int{n, n + 5}) {
		t.Errorf("default GOMAXPROCS for 5 workers = %v, want [%d %d]", got, n, n+5)
	}
	if got := (Options{GOMAXPROCS: []int{3}}).procsFor(5); !reflect.DeepEqual(got, []int{3}) {
		t.Errorf("explicit GOMAXPROCS = %v, want [3]", got)
	}
}

func TestSharesSplitTheGapByMechanism(t *testing.T) {
	row := func(q string, p50, p99, done float64) Result {
		return Result{Queue: q, Scenario: "mixed", Workers: 5, GOMAXPROCS: 7, P50us: p50, P99us: p99, DoneP99us: done}
	}
	results := []Result{
		row(QueueClientGo, 1000, 2000, 3000),
		row(QueueCtrlRuntime, 50, 90, 100),
		row(QueueGantryOrder, 100, 1000, 1500),
		row(QueueGantryReserve, 20, 500, 900),
		row(QueueGantry, 10, 50, 300),
		// another group without every queue gets no split
		{Queue: QueueClientGo, Scenario: "mixed", Workers: 5, GOMAXPROCS: 2, P50us: 5},
	}
	got := Shares(results)
	if len(got) != 3 {
		t.Fatalf("%d shares, want 3 (one group, three metrics): %+v", len(got), got)
	}
	p50 := got[0]
	if p50.Metric != "p50_us" || p50.GapUs != 990 || p50.OrderingUs != 900 || p50.ReserveUs != 80 || p50.RealTimeUs != 10 {
		t.Errorf("p50 split = %+v", p50)
	}
	for _, s := range got {
		if sum := s.Ordering + s.Reserve + s.RealTime; math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: shares add up to %v, want 1", s.Metric, sum)
		}
		if s.OrderingUs+s.ReserveUs+s.RealTimeUs != s.GapUs {
			t.Errorf("%s: steps do not add up to the gap: %+v", s.Metric, s)
		}
	}
}

func TestCalibrationIsPlausible(t *testing.T) {
	calibrateOnce.Do(calibrate)
	if itersPerMs < 1000 {
		t.Fatalf("calibrated %d iterations per ms; the spin loop cannot be that slow", itersPerMs)
	}
}

// TestUnstartedCriticalItemsStillCount: a queue so slow that a critical
// item never starts (or never finishes) must not look fast by losing that
// sample.
func TestUnstartedCriticalItemsStillCount(t *testing.T) {
	c := newCaseRun(ScenarioMixed, Options{}.withDefaults())
	c.pending.Store(2)
	c.enq[3].Store(time.Now().Add(-2 * time.Second).UnixNano())
	c.working[4].Store(time.Now().Add(-3 * time.Second).UnixNano())
	c.awaitPending(context.Background(), 20*time.Millisecond)
	r := c.result(time.Second, time.Second)
	if r.Critical != 1 || r.MaxUs < 2e6 {
		t.Fatalf("censored item: %d samples, max %.0fus; want 1 sample of at least 2s", r.Critical, r.MaxUs)
	}
	if c.done.TotalCount() != 2 || c.done.Max() < 3e6 {
		t.Fatalf("done figures hold %d samples, max %dus; want both items, the longest at least 3s", c.done.TotalCount(), c.done.Max())
	}
}
