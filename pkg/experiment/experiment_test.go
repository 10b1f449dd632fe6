package experiment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/report"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// fakeContainers gives each policy a fixed share of Atoll's containers so the
// comparisons have known answers.
var fakeContainers = map[string]int64{
	"atoll": 1000, "commercial": 950, "knative": 900, "kraken": 800, "fifer": 750, "isbatch": 600, "cypress": 570, "oracle": 500, "gantry": 550,
}

// liveShare makes mean live containers differ from spawned ones for every
// policy but Atoll, so that the two comparisons cannot be confused.
func liveShare(policy string) float64 {
	if policy == "atoll" {
		return 1
	}
	return 0.6
}

// fakeSim stands in for the engine: its result is a pure function of the
// config, and it reports progress the way the engine does.
func fakeSim(cfg sim.Config) (sim.Result, error) {
	total := cfg.Trace.Duration()
	for s := time.Duration(0); s <= total; s += total / 4 {
		if cfg.Progress != nil {
			cfg.Progress(s, total)
		}
	}
	return sim.Result{
		App: cfg.App.Name, Dist: cfg.Dist.Name(), Trace: cfg.Trace.Name, Policy: cfg.Policy,
		Requests: int64(cfg.Trace.Total()), ContainersSpawned: fakeContainers[cfg.Policy],
		AvgContainers: liveShare(cfg.Policy) * float64(fakeContainers[cfg.Policy]),
		WorkFloor:     200, Bound: 250,
		SLO:     cfg.App.SLO,
		Latency: sim.Latency{SLOCompliance: 0.999, P99: cfg.App.SLO / 2, MeanExec: 100 * time.Millisecond},
		EnergyJ: float64(fakeContainers[cfg.Policy]) * 10, JobsPerContainer: 1000 / float64(fakeContainers[cfg.Policy]),
		WallSeconds: 0.01,
		LatencyCDF:  []sim.CDFPoint{{Millis: 1, Fraction: 0.5}, {Millis: 2, Fraction: 1}},
	}, nil
}

func smallJobs(t *testing.T, policies []string) []Job {
	t.Helper()
	app, _ := workload.Lookup("image-compression")
	dist, _ := workload.LookupDist("light")
	tr, err := trace.Generate("poisson", 10, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	return PolicyJobs(sim.Config{App: app, Dist: dist, Trace: tr, Seed: 1}, policies, "", ScaleReal)
}

func TestRunReturnsRecordsInJobOrderWhateverTheWorkers(t *testing.T) {
	jobs := smallJobs(t, policy.Names())
	for _, workers := range []int{1, 3, 16} {
		recs, err := Run(context.Background(), jobs, Options{Workers: workers, Simulate: fakeSim})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if r.Policy != jobs[i].Config.Policy || r.ContainersSpawned != fakeContainers[r.Policy] {
				t.Errorf("workers=%d record %d = %s/%d", workers, i, r.Policy, r.ContainersSpawned)
			}
			if r.Scale != ScaleReal || r.Cores != sim.DefaultNodes*sim.DefaultCoresPerNode {
				t.Errorf("labels not carried: %+v", r)
			}
		}
	}
}

func TestRunRunsJobsInParallel(t *testing.T) {
	var inFlight, peak atomic.Int32
	slow := func(cfg sim.Config) (sim.Result, error) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		return fakeSim(cfg)
	}
	if _, err := Run(context.Background(), smallJobs(t, policy.Names()), Options{Workers: 4, Simulate: slow}); err != nil {
		t.Fatal(err)
	}
	if peak.Load() < 2 {
		t.Errorf("at most %d simulation ran at once with 4 workers", peak.Load())
	}
}

func TestRunStopsAtTheFirstFailureAndNamesTheJob(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	failing := func(cfg sim.Config) (sim.Result, error) {
		calls.Add(1)
		if cfg.Policy == "kraken" {
			return sim.Result{}, boom
		}
		return fakeSim(cfg)
	}
	jobs := append(smallJobs(t, policy.Names()), smallJobs(t, policy.Names())...)
	_, err := Run(context.Background(), jobs, Options{Workers: 1, Simulate: failing})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "image-compression/light/poisson/kraken") {
		t.Fatalf("err = %v", err)
	}
	if int(calls.Load()) >= len(jobs) {
		t.Errorf("all %d jobs ran after a failure", calls.Load())
	}
}

func TestRunTurnsAPanicIntoAnErrorNamingTheRun(t *testing.T) {
	panicky := func(cfg sim.Config) (sim.Result, error) {
		if cfg.Policy == "fifer" {
			panic("index out of range")
		}
		return fakeSim(cfg)
	}
	_, err := Run(context.Background(), smallJobs(t, policy.Names()), Options{Workers: 2, Simulate: panicky})
	if !errors.Is(err, ErrSimPanicked) || !strings.Contains(err.Error(), "/fifer: ") || !strings.Contains(err.Error(), "index out of range") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, smallJobs(t, policy.Names()), Options{Workers: 1, Simulate: fakeSim})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, err := Run(context.Background(), nil, Options{}); !errors.Is(err, ErrNoJobs) {
		t.Errorf("no jobs: err = %v", err)
	}
}

func TestRunDrawsAProgressBar(t *testing.T) {
	var buf bytes.Buffer
	_, err := Run(context.Background(), smallJobs(t, []string{"atoll", "cypress"}), Options{Workers: 2, Progress: &buf, Simulate: fakeSim})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "100%") || !strings.Contains(buf.String(), "simulating 2 runs") {
		t.Errorf("progress output %q", buf.String())
	}
}

// Cypress section 5: 5 apps x 3 distributions x 3 traces on 6 x 48 cores, and
// Twitter scaled to a 5450 rps peak on ~6.4k cores.
func TestPaperJobsCoverTheMatrix(t *testing.T) {
	plan := DefaultPaperPlan()
	plan.Duration, plan.LargeDuration = 2*time.Minute, time.Minute
	jobs, err := PaperJobs(plan)
	if err != nil {
		t.Fatal(err)
	}
	np := len(policy.Names())
	// Figure 2: No CP and CP on audio-translation, 3 distributions x the
	// 2 stable traces (CP+LAS is cypress, already in the matrix).
	const fig2 = 2 * 3 * 2
	if want := 5*3*3*np + 5*3*np + fig2; len(jobs) != want {
		t.Fatalf("%d jobs, want %d", len(jobs), want)
	}
	seen := map[string]int{}
	for _, j := range jobs {
		lbl := label(j)
		if !slices.Contains(policy.Names(), j.Config.Policy) {
			if j.Config.App.Name != ChainAblationApp || (lbl != "poisson" && lbl != "wiki") {
				t.Errorf("figure-2 scheme %s runs on %s under %s", j.Config.Policy, j.Config.App.Name, lbl)
			}
			seen["fig2"]++
			continue
		}
		seen[lbl]++
		peak := j.Config.Trace.Peak()
		switch lbl {
		case "poisson":
			checkNear(t, "poisson mean", j.Config.Trace.Mean(), PoissonRate)
		case "wiki":
			checkNear(t, "wiki peak", peak, 331)
		case "twitter":
			checkNear(t, "twitter peak", peak, TwitterRealPeak)
		case LargeTraceLabel:
			checkNear(t, "large twitter peak", peak, TwitterLargePeak)
			if c := j.cores(); c < 6300 || c > 6500 {
				t.Errorf("large scale has %d cores, want ~6.4k", c)
			}
			continue
		}
		if j.cores() != 288 {
			t.Errorf("%s: %d cores, want 288", lbl, j.cores())
		}
	}
	if seen["fig2"] != fig2 {
		t.Errorf("%d figure-2 jobs, want %d", seen["fig2"], fig2)
	}
	for _, l := range []string{"poisson", "wiki", "twitter", LargeTraceLabel} {
		if seen[l] != 15*np {
			t.Errorf("%s: %d jobs, want %d", l, seen[l], 15*np)
		}
	}
}

func checkNear(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want)/want > 0.01 {
		t.Errorf("%s = %.1f, want %.1f", what, got, want)
	}
}

func TestPaperJobsRejectBadPlans(t *testing.T) {
	for _, mod := range []func(*PaperPlan){
		func(p *PaperPlan) { p.Duration = 0 },
		func(p *PaperPlan) { p.LargeDuration = -time.Second },
		func(p *PaperPlan) { p.Policies = []string{"cypress", "magic"} },
		func(p *PaperPlan) { p.Policies = nil },
	} {
		p := DefaultPaperPlan()
		mod(&p)
		if _, err := PaperJobs(p); !errors.Is(err, ErrBadPlan) {
			t.Errorf("plan %+v: err = %v, want ErrBadPlan", p, err)
		}
	}
	p := DefaultPaperPlan()
	p.SkipLarge, p.LargeDuration = true, 0
	if jobs, err := PaperJobs(p); err != nil || len(jobs) != 45*len(p.Policies)+12 {
		t.Errorf("SkipLarge: %d jobs, err %v", len(jobs), err)
	}
}

func paperRecords(t *testing.T) []report.Record {
	t.Helper()
	plan := DefaultPaperPlan()
	plan.Duration, plan.LargeDuration = 2*time.Second, 2*time.Second
	jobs, err := PaperJobs(plan)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := Run(context.Background(), jobs, Options{Simulate: fakeSim})
	if err != nil {
		t.Fatal(err)
	}
	// A replaced simulator gets no yardsticks; these stand in for them:
	// the fake oracle's 300 live containers, a fixed pool of 315 and
	// oracle-predicted at 360.
	for i := range recs {
		recs[i].Oracle, recs[i].FixedPool, recs[i].FixedPoolSLO = 300, 315, recs[i].SLOCompliance
		recs[i].OraclePredicted, recs[i].OraclePredictedSLO = 360, 1
	}
	return recs
}

func TestPaperDocumentSetsOurFiguresBesideThePapers(t *testing.T) {
	doc := PaperDocument(paperRecords(t), PaperMeta{Plan: DefaultPaperPlan(), Runs: 420})
	var buf bytes.Buffer
	if err := report.WriteMarkdown(&buf, doc); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	// Every claim appears, named by its figure, with our numbers computed
	// from the records: the fake gives cypress 570 of Atoll's 1000.
	for _, want := range []string{
		"| Fig. 11a | Image Compression, heavy, stable: containers vs Atoll | -43% | cypress: -43% spawned, -66% live | -45% spawned, -67% live |",
		"| Fig. 1b | light, all apps, stable: Static Batch (Kraken) containers vs IS Batch | -13% | kraken: +33% spawned, +33% live | — |",
		"| Fig. 12a | Email Categorization, heavy, stable: containers vs Fifer | -30% | cypress: -24% spawned, -24% live | -27% spawned, -27% live |",
		"| Figs. 12-13 | chain apps, all distributions, stable: SLO compliance | ≥ 99.97% | cypress: min 99.90% |",
		"p99 within SLO",
		"## Containers against Atoll, per policy",
		"## SLO compliance per policy",
		"| spawned (stable traces) | heavy | medial | light | all |",
		"| cypress | -43% | -43% | -43% | -43% |",
		"| mean live (Twitter, 6384 cores) | heavy | medial | light | all |\n|---|--:|--:|--:|--:|\n| atoll | — | — | — | — |\n| commercial | -43% |",
		"| kraken | -52% | -52% | -52% | -52% |",
		"## Headline: mean live containers over the oracle's",
		"| gantry | 1.100× / 1.100× / 1.100× | 1.050× / 1.050× / 1.050× | 99.90% / 99.90% / 99.90% |",
		"| *bound* | 0.833× / 0.833× / 0.833× | | |",
		"| *oracle-predicted* (frontier) | 1.200× / 1.200× / 1.200× | | 100.00% / 100.00% / 100.00% |",
		"## Distance to the clairvoyant bound",
		"| gantry | +32.0% / +32.0% / +32.0% | +65.0% / +65.0% / +65.0% |",
		"420 runs",
		"## Chained prediction (figure 2)",
		"| No CP | 99.90% |",
		"| CP+LAS (cypress) | 99.90% |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, c := range paperClaims() {
		if !strings.Contains(md, fmt.Sprintf("| %s | %s |", c.figure, c.condition)) {
			t.Errorf("claim %s %q missing", c.figure, c.condition)
		}
	}
	if strings.Contains(md, na) {
		t.Errorf("a claim found no data in a full matrix:\n%s", md)
	}
	summary := md[strings.Index(md, "## Containers against Atoll"):strings.Index(md, "## Beside the paper")]
	if strings.Contains(summary, "cypress-no-cp") {
		t.Error("the figure-2 schemes belong in their own section, not the per-policy tables")
	}
}

func TestPaperDocumentSaysNAWhenAPolicyIsMissing(t *testing.T) {
	var recs []report.Record
	for _, r := range paperRecords(t) {
		if r.Policy != "atoll" {
			recs = append(recs, r)
		}
	}
	var buf bytes.Buffer
	if err := report.WriteMarkdown(&buf, PaperDocument(recs, PaperMeta{Plan: DefaultPaperPlan()})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| Fig. 11a | Image Compression, heavy, stable: containers vs Atoll | -43% | cypress: n/a |") {
		t.Error("a comparison with a missing baseline must say n/a, not invent a number")
	}
}

func TestPaperReportDirHasSummaryPlots(t *testing.T) {
	dir := t.TempDir()
	// One app and distribution keep the per-condition plots few; the
	// summaries average over whatever cells exist.
	var recs []report.Record
	for _, r := range paperRecords(t) {
		if r.App == "image-compression" && r.Dist == "light" {
			recs = append(recs, r)
		}
	}
	if err := report.WriteDir(dir, PaperDocument(recs, PaperMeta{Plan: DefaultPaperPlan()})); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"summary-stable-containers.png", "summary-stable-live.png", "summary-stable-slo.png",
		"summary-twitter-large-containers.png", "summary-twitter-large-live.png", "summary-twitter-large-slo.png"} {
		if st, err := os.Stat(filepath.Join(dir, report.PlotsDir, f)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if keep := os.Getenv("GANTRY_KEEP_REPORT"); keep != "" {
		_ = os.CopyFS(keep, os.DirFS(dir))
	}
}

func TestTracesListsEachTraceOnce(t *testing.T) {
	plan := DefaultPaperPlan()
	plan.Duration, plan.LargeDuration = time.Minute, time.Minute
	jobs, err := PaperJobs(plan)
	if err != nil {
		t.Fatal(err)
	}
	abs := Traces(jobs, false)
	if len(abs) != 4 || abs[3].Name != LargeTraceLabel {
		t.Fatalf("traces %v", abs)
	}
	checkNear(t, "large peak", slicesMax(abs[3].PerSecond), TwitterLargePeak)
	rel := Traces(jobs, true)
	if !strings.HasPrefix(rel[1].Name, "wiki (mean 302 rps)") {
		t.Errorf("relative name %q", rel[1].Name)
	}
	checkNear(t, "relative wiki peak", slicesMax(rel[1].PerSecond), 331.0/302)
}

func slicesMax(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func TestPaperReportWithAtollAloneStillWrites(t *testing.T) {
	var recs []report.Record
	for _, r := range paperRecords(t) {
		if r.Policy == "atoll" && r.App == "image-compression" && r.Dist == "heavy" {
			recs = append(recs, r)
		}
	}
	dir := t.TempDir()
	if err := report.WriteDir(dir, PaperDocument(recs, PaperMeta{Plan: DefaultPaperPlan()})); err != nil {
		t.Fatalf("a matrix of Atoll alone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, report.PlotsDir, "summary-stable-slo.png")); err != nil {
		t.Error(err)
	}
}

// Figure 2 needs all three schemes: without them the section is left out
// rather than filled with numbers from a partial comparison.
func TestPaperDocumentLeavesOutFigure2WithoutItsSchemes(t *testing.T) {
	var recs []report.Record
	for _, r := range paperRecords(t) {
		if r.Policy != "cypress-cp" {
			recs = append(recs, r)
		}
	}
	var buf bytes.Buffer
	if err := report.WriteMarkdown(&buf, PaperDocument(recs, PaperMeta{Plan: DefaultPaperPlan()})); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "## Chained prediction (figure 2)") {
		t.Error("figure 2 reported without the CP scheme")
	}
}
