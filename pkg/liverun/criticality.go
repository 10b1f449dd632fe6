package liverun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// The criticality scenario: PREEMPT-FaaS's idea in the data plane. A
// critical function (the sentiment-analysis model, criticality 9) runs
// beside a low-criticality flood (image-compression, criticality 0) on a
// runtime bounded to CriticalityCapacity instances, the flood bursty and
// above what the capacity serves. One gateway declares the criticalities;
// the other declares both functions at 0, so the only difference is
// whether a critical scale-up may take capacity from the flood.
const (
	criticalApp   = "sentiment-analysis"
	floodApp      = "image-compression"
	CriticalLevel = 9
	// CriticalityCapacity bounds each gateway's instances, both functions
	// together.
	CriticalityCapacity = 8
	// CriticalityStartDelay is the scenario's instance start: the Cypress
	// paper's 1.5 s container start, so that the critical function's
	// scale-up is slow enough for the capacity it takes to matter.
	CriticalityStartDelay = 1500 * time.Millisecond
	// Rates: the critical function's steady Poisson load, and the flood's
	// mean on the twitter trace (about 8 busy instances at its mean, more
	// in its bursts).
	criticalRate = 3
	floodRate    = 24
)

// Arm names of the scenario.
const (
	ArmWithCriticality    = "with criticality"
	ArmWithoutCriticality = "without criticality"
)

// CriticalityReport is the scenario's outcome.
type CriticalityReport struct {
	Scenario     string           `json:"scenario"`
	Policy       string           `json:"policy"`
	Capacity     int              `json:"capacity"`
	StartDelayMs float64          `json:"start_delay_ms"`
	DurationS    float64          `json:"duration_s"`
	WarmupS      float64          `json:"warmup_s"`
	Seed         uint64           `json:"seed"`
	Arms         []CriticalityArm `json:"arms"`
	Verdict      string           `json:"verdict"`
	Interrupted  bool             `json:"interrupted,omitempty"`

	timelines [][]loadgen.Second // per arm, the critical function's
	latencies [][]time.Duration  // per arm, the critical function's
	arrivals  [2][]float64       // critical, flood
	sloMs     float64
	stopped   func()
}

// Wait returns once the run's gateways have stopped, as UpReport.Wait.
func (r *CriticalityReport) Wait() { waitStopped(r.stopped) }

// CriticalityArm is one gateway of the scenario.
type CriticalityArm struct {
	Name              string        `json:"name"`
	Functions         []FunctionRun `json:"functions"`
	ContainersSpawned int64         `json:"containers_spawned"`
	AvgContainers     float64       `json:"avg_containers"`
}

// FunctionRun is one function's requests on one gateway.
type FunctionRun struct {
	Function      string           `json:"function"`
	Criticality   int              `json:"criticality"`
	Trace         string           `json:"trace"`
	Rate          float64          `json:"rate"`
	Requests      int64            `json:"requests"`
	Errors        int64            `json:"errors"`
	ErrorsByKind  map[string]int64 `json:"errors_by_kind"`
	SLOMs         float64          `json:"slo_ms"`
	SLOCompliance float64          `json:"slo_compliance"`
	P50Ms         float64          `json:"p50_ms"`
	P99Ms         float64          `json:"p99_ms"`
}

// Criticality runs the scenario under cfg.Policies[0] (default gantry),
// with cfg's duration, warm-up, seed, start delay and capacity (default
// CriticalityCapacity; 0 in cfg means the default, as the scenario needs a
// bound).
func Criticality(ctx context.Context, cfg UpConfig) (*CriticalityReport, error) {
	if len(cfg.Policies) == 0 {
		cfg.Policies = []string{"gantry"}
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = CriticalityCapacity
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	crit, err := replayFunction(criticalApp, cfg.StartDelay)
	if err != nil {
		return nil, err
	}
	flood, err := replayFunction(floodApp, cfg.StartDelay)
	if err != nil {
		return nil, err
	}
	// The flood may queue deep rather than be refused: the point is
	// whether the critical function waits behind it.
	flood.MaxQueue = stack.MaxQueueBound
	arms := []armSpec{{name: ArmWithCriticality, policy: cfg.Policies[0]}, {name: ArmWithoutCriticality, policy: cfg.Policies[0]}}
	for i, level := range []int{CriticalLevel, 0} {
		c := crit
		c.Criticality = level
		file, err := writeStackFile(&stack.Stack{Functions: []stack.Function{c, flood}})
		if err != nil {
			return nil, err
		}
		defer os.Remove(file)
		arms[i].stackFile = file
	}
	streams := make([]streamSpec, 2)
	for i, s := range []struct {
		fn    stack.Function
		app   string
		trace string
		rate  float64
	}{{crit, criticalApp, "poisson", criticalRate}, {flood, floodApp, "twitter", floodRate}} {
		if streams[i], err = functionStream(cfg, s.fn, s.app, s.trace, s.rate, uint64(i)); err != nil {
			return nil, err
		}
	}
	results, stopped, err := runArms(ctx, armsConfig{exe: cfg.Exe, arms: arms, streams: streams, functions: 2,
		capacity: cfg.Capacity, startDelay: cfg.StartDelay, idleTimeout: cfg.IdleTimeout, gatewayLog: cfg.GatewayLog, progress: cfg.Progress})
	if err != nil {
		stopped()
		return nil, err
	}
	rep := newCriticalityReport(cfg, streams, results)
	rep.stopped = stopped
	return rep, nil
}

// replayFunction is the one function of a single-function app as its
// replay stack declares it.
func replayFunction(app string, startDelay time.Duration) (stack.Function, error) {
	model, err := workload.Lookup(app)
	if err != nil {
		return stack.Function{}, err
	}
	s, err := ReplayStack(model, startDelay+100*time.Millisecond)
	if err != nil {
		return stack.Function{}, err
	}
	return s.Functions[0], nil
}

// functionStream is load on one function: its trace, the app's sizes and
// replay payloads; offset keeps the two streams' seeds apart.
func functionStream(cfg UpConfig, fn stack.Function, app, traceName string, rate float64, offset uint64) (streamSpec, error) {
	model, err := workload.Lookup(app)
	if err != nil {
		return streamSpec{}, err
	}
	dist, err := workload.LookupDist(cfg.Dist)
	if err != nil {
		return streamSpec{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	gen, err := functions.Payload("replay:" + app)
	if err != nil {
		return streamSpec{}, err
	}
	base := loadgen.Config{Dist: dist, MinSize: model.MinSize, MaxSize: model.MaxSize, Payload: loadgen.Payload(gen),
		SLO: fn.SLO, Drain: upDrain}
	st := streamSpec{name: fn.Name, path: "/function/" + fn.Name, slo: fn.SLO, load: base, warmup: base}
	seed := cfg.Seed + 7919*offset
	if st.load.Trace, err = trace.Generate(traceName, rate, cfg.Duration, seed); err != nil {
		return st, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	st.load.Seed = seed
	if cfg.Warmup > 0 {
		if st.warmup.Trace, err = trace.Generate(traceName, rate, cfg.Warmup, seed+1000); err != nil {
			return st, fmt.Errorf("%w: %v", ErrBadConfig, err)
		}
		st.warmup.Seed = seed + 1000
	}
	return st, nil
}

func newCriticalityReport(cfg UpConfig, streams []streamSpec, results []armResult) *CriticalityReport {
	rep := &CriticalityReport{Scenario: "criticality", Policy: cfg.Policies[0], Capacity: cfg.Capacity,
		StartDelayMs: millis(cfg.StartDelay), DurationS: cfg.Duration.Seconds(), WarmupS: max(cfg.Warmup, 0).Seconds(),
		Seed: cfg.Seed, sloMs: millis(streams[0].slo),
		arrivals: [2][]float64{streams[0].load.Trace.PerSecond, streams[1].load.Trace.PerSecond}}
	traces := []string{"poisson", "twitter"}
	rates := []float64{criticalRate, floodRate}
	for i, a := range results {
		arm := CriticalityArm{Name: a.spec.name, ContainersSpawned: a.spawned, AvgContainers: a.avgLive}
		for j, sr := range a.streams {
			s := sr.res.Summary()
			level := 0
			if j == 0 && i == 0 {
				level = CriticalLevel
			}
			fr := FunctionRun{Function: sr.spec.name, Criticality: level, Trace: traces[j], Rate: rates[j],
				Requests: s.Requests, Errors: s.Errors, ErrorsByKind: s.ErrorsByKind, SLOMs: s.SLOMs,
				SLOCompliance: s.SLOCompliance, P50Ms: s.P50Ms, P99Ms: s.P99Ms}
			if fr.ErrorsByKind == nil {
				fr.ErrorsByKind = map[string]int64{}
			}
			arm.Functions = append(arm.Functions, fr)
		}
		rep.Arms = append(rep.Arms, arm)
		rep.Interrupted = rep.Interrupted || a.interrupted
		rep.timelines = append(rep.timelines, a.streams[0].res.Timeline)
		var lat []time.Duration
		for _, smp := range a.streams[0].samples {
			if smp.Measured {
				lat = append(lat, smp.Latency)
			}
		}
		rep.latencies = append(rep.latencies, lat)
	}
	rep.Verdict = rep.verdict()
	return rep
}

func (r *CriticalityReport) verdict() string {
	if len(r.Arms) != 2 {
		return "the scenario did not run both gateways"
	}
	w, wo := r.Arms[0].Functions, r.Arms[1].Functions
	return fmt.Sprintf("the critical function %s met its SLO for %.2f%% of requests with criticality (p99 %.0f ms) against %.2f%% without (p99 %.0f ms); the flood %s: %.2f%% against %.2f%%",
		w[0].Function, 100*w[0].SLOCompliance, w[0].P99Ms, 100*wo[0].SLOCompliance, wo[0].P99Ms,
		w[1].Function, 100*w[1].SLOCompliance, 100*wo[1].SLOCompliance)
}

// WriteJSON prints the report as one JSON object.
func (r *CriticalityReport) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteText prints the table and the verdict.
func (r *CriticalityReport) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, r.markdown())
	return err
}

func (r *CriticalityReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# gantry up --scenario criticality, under %s\n\n", r.Policy)
	fmt.Fprintf(&b, "A critical function beside a low-criticality flood, %d instances at most per gateway, instance start delay %v, "+
		"%.0f s measured after %.0f s of warm-up, seed %d. One gateway declares the critical function at criticality %d, "+
		"the other declares both at 0.\n\n", r.Capacity, time.Duration(r.StartDelayMs*float64(time.Millisecond)),
		r.DurationS, r.WarmupS, r.Seed, CriticalLevel)
	b.WriteString("| gateway | function | criticality | load | requests | errors | SLO | SLO compliance | p50 | p99 |\n")
	b.WriteString("|---|---|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, a := range r.Arms {
		for _, f := range a.Functions {
			fmt.Fprintf(&b, "| %s | %s | %d | %s, %g/s | %d | %d | %.0f ms | %.2f%% | %.0f ms | %.0f ms |\n",
				a.Name, f.Function, f.Criticality, f.Trace, f.Rate, f.Requests, f.Errors, f.SLOMs,
				100*f.SLOCompliance, f.P50Ms, f.P99Ms)
		}
	}
	fmt.Fprintf(&b, "\nMean live instances: ")
	for i, a := range r.Arms {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.2f %s (%d spawned)", a.AvgContainers, a.Name, a.ContainersSpawned)
	}
	fmt.Fprintf(&b, ".\n\n**Verdict:** %s.\n", r.Verdict)
	if r.Interrupted {
		b.WriteString("\nInterrupted before the trace ended: the figures cover what finished.\n")
	}
	return b.String()
}

// Files the scenario writes.
const (
	CriticalPlot        = "critical.png"
	CriticalLatencyPlot = "critical-latency.png"
)

// WriteDir writes report.md, report.json, critical.png and
// critical-latency.png.
func (r *CriticalityReport) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := r.plotCritical(filepath.Join(dir, CriticalPlot)); err != nil {
		return err
	}
	var tails []namedLatency
	for i, a := range r.Arms {
		tails = append(tails, namedLatency{name: a.Name, latency: r.latencies[i]})
	}
	if err := plotLatencyTails(filepath.Join(dir, CriticalLatencyPlot), tails, r.sloMs); err != nil {
		return err
	}
	md := r.markdown() + fmt.Sprintf("\n![critical function's latency](%s)\n\n![its distribution](%s)\n", CriticalPlot, CriticalLatencyPlot)
	return writeReportFiles(dir, UpReportFile, md, UpJSONFile, r)
}

// plotCritical draws the critical function's slowest request of every
// second on both gateways against its SLO, with both streams' arrivals
// beneath.
func (r *CriticalityReport) plotCritical(path string) error {
	top := plot.New()
	top.Title.Text = "The critical function's latency beside a flood, with and without criticality"
	top.Y.Label.Text = "slowest request of the second (ms)"
	top.Y.Min = 0
	top.Legend.Top = true
	top.Legend.Left = true
	top.Add(plotter.NewGrid())
	end := float64(len(r.arrivals[0]))
	highest := r.sloMs
	for i, tl := range r.timelines {
		var pts plotter.XYs
		for sec, s := range tl {
			if s.MaxLatency > 0 {
				pts = append(pts, plotter.XY{X: float64(sec) + 0.5, Y: millis(s.MaxLatency)})
				highest = max(highest, millis(s.MaxLatency))
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		top.Add(line)
		top.Legend.Add(r.Arms[i].Name, line)
	}
	if err := addRefLine(top, plotter.XYs{{X: 0, Y: r.sloMs}, {X: end, Y: r.sloMs}},
		fmt.Sprintf("SLO %v", time.Duration(r.sloMs*float64(time.Millisecond)))); err != nil {
		return err
	}
	top.Y.Max = 1.6 * highest
	bottom := plot.New()
	bottom.X.Label.Text = "time since the measured phase began (s)"
	bottom.Y.Label.Text = "arrivals (requests/s)"
	bottom.Y.Min = 0
	bottom.Legend.Top = true
	bottom.Legend.Left = true
	bottom.Add(plotter.NewGrid())
	for k, name := range []string{"critical", "flood"} {
		var steps plotter.XYs
		for sec, v := range r.arrivals[k] {
			steps = append(steps, plotter.XY{X: float64(sec), Y: v}, plotter.XY{X: float64(sec + 1), Y: v})
		}
		if len(steps) == 0 {
			continue
		}
		line, err := plotter.NewLine(steps)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(2 + k)
		bottom.Add(line)
		bottom.Legend.Add(name, line)
	}
	top.X.Min, top.X.Max, bottom.X.Min, bottom.X.Max = 0, end, 0, end
	return saveStacked(path, []*plot.Plot{top, bottom}, 8*vg.Inch, 6*vg.Inch)
}
