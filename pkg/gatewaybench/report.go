package gatewaybench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what one comparison measured; it encodes as the --json object.
type Report struct {
	StartedAt  time.Time `json:"started_at"`
	RatePerS   float64   `json:"rate_per_s"`
	DurationS  float64   `json:"duration_s"`
	RoundS     float64   `json:"round_s"`
	WarmupS    float64   `json:"warmup_s"`
	Seed       uint64    `json:"seed"`
	BodyBytes  int       `json:"body_bytes"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	// GOGC is what both gateway children ran with; 0 is Go's default.
	GOGC      int    `json:"gogc"`
	NumCPU    int    `json:"num_cpu"`
	GoVersion string `json:"go_version"`
	// LoadAvgStart and LoadAvgEnd are the 1, 5 and 15 minute load
	// averages before set-up and after the last round: figures measured
	// on a busy machine are only comparable side by side.
	LoadAvgStart [3]float64 `json:"load_avg_start"`
	LoadAvgEnd   [3]float64 `json:"load_avg_end"`
	Interrupted  bool       `json:"interrupted"`
	// Notes say which paths were skipped and why.
	Notes    []string `json:"notes"`
	OpenFaaS OpenFaaS `json:"openfaas"`
	// Paths has one entry per path measured, direct first.
	Paths []PathResult `json:"paths"`
	// Hops are differences between paths: each gateway's or the
	// provider's own share of the latency.
	Hops    []Hop    `json:"hops"`
	Targets []Target `json:"targets"`
	// Rounds has one row per path and round, for rounds.csv.
	Rounds []RoundRow `json:"-"`
}

// OpenFaaS says whether the OpenFaaS gateway was measured, and if not why.
type OpenFaaS struct {
	Binary   string `json:"binary"`
	Version  string `json:"version"`
	Measured bool   `json:"measured"`
	URL      string `json:"url,omitempty"`
	Log      string `json:"log,omitempty"`
	Note     string `json:"note,omitempty"`
}

// PathResult is one path's latency over all its rounds, from each request's
// intended send time to the end of its response.
type PathResult struct {
	Path         string           `json:"path"`
	Via          string           `json:"via"`
	Requests     int64            `json:"requests"`
	OK           int64            `json:"ok"`
	Errors       int64            `json:"errors"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	P50us        float64          `json:"p50_us"`
	P90us        float64          `json:"p90_us"`
	P99us        float64          `json:"p99_us"`
	P999us       float64          `json:"p999_us"`
	MaxUs        float64          `json:"max_us"`
	// AddedP50us and AddedP99us are this path's percentile minus the
	// direct path's: the latency the hops in between add.
	AddedP50us float64 `json:"added_p50_us"`
	AddedP99us float64 `json:"added_p99_us"`
	// CPUPerRequestUs is the CPU time that this process and the gateway
	// children used during the path's turns, per request: load generator
	// and instance on every path, plus the gateways and provider on theirs.
	CPUPerRequestUs float64 `json:"cpu_per_request_us"`
	// curve is the latency at curvePercentiles, for the plot.
	curve []float64
}

// Hop is the latency one component adds: the difference of the same
// percentile on two paths that differ by that component alone. A
// difference of percentiles is not the percentile of the hop's own time,
// but it is what a caller sees change, and it is computed the same way for
// every gateway.
type Hop struct {
	Hop  string `json:"hop"`
	Path string `json:"path"`
	Base string `json:"base"`
	// P50us and P99us compare the percentiles of all the requests.
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
	// CPUPerRequestUs is the difference in CPU per request: what the
	// component costs, the figure least moved by other processes.
	CPUPerRequestUs float64 `json:"cpu_per_request_us"`
	// RoundMedianP50us and RoundMedianP99us are the median over rounds of
	// the same difference taken within each round. The two paths of a
	// round run seconds apart, so a burst from another process that lands
	// on one path's turn moves one round's difference, not the median:
	// on a shared machine this is the steadier figure, the pooled one the
	// stricter.
	RoundMedianP50us float64 `json:"round_median_p50_us"`
	RoundMedianP99us float64 `json:"round_median_p99_us"`
}

// Target is one of the goals, checked against this run's pooled
// percentiles.
type Target struct {
	Target string `json:"target"`
	// Hop is the Gantry hop checked: the gateway in its own process when
	// that path ran, else the in-process one.
	Hop      string  `json:"hop"`
	ValueUs  float64 `json:"value_us"`
	LimitUs  float64 `json:"limit_us"`
	Met      bool    `json:"met"`
	Measured bool    `json:"measured"`
	// Conclusive is false when a hop it compares came out zero or
	// negative: noise, not a measurement.
	Conclusive bool `json:"conclusive"`
}

// RoundRow is one path's share of one round.
type RoundRow struct {
	Round, Position  int
	Path             string
	Requests, Errors int64
	P50us, P99us     float64
	MaxUs            float64
}

// Hop names.
const (
	HopGantry         = "Gantry gateway"
	HopGantryInproc   = "Gantry gateway, in-process"
	HopProvider       = "provider"
	HopOpenFaaS       = "OpenFaaS gateway"
	HopOpenFaaSStack  = "OpenFaaS gateway + provider"
	TargetGantryP99   = "Gantry gateway added p99 < 1 ms"
	TargetHalfP50     = "Gantry gateway added p50 < half the OpenFaaS gateway's"
	TargetHalfP99     = "Gantry gateway added p99 < half the OpenFaaS gateway's"
	gantryP99LimitUs  = 1000
	openfaasHalfRatio = 0.5
)

// curvePercentiles are where the plot samples each path's distribution;
// dense towards the tail, where gateways differ.
var curvePercentiles = []float64{1, 5, 10, 20, 30, 40, 50, 60, 70, 75, 80, 85, 90, 92, 94, 95, 96, 97, 98, 99, 99.5, 99.7, 99.9}

func newReport(o Options, gomaxprocs int) *Report {
	return &Report{
		StartedAt: time.Now().UTC().Truncate(time.Second),
		RatePerS:  o.Rate, DurationS: o.Duration.Seconds(), RoundS: o.Round.Seconds(), WarmupS: o.Warmup.Seconds(),
		Seed: o.Seed, BodyBytes: o.BodyBytes, GOMAXPROCS: gomaxprocs, GOGC: o.GOGC, NumCPU: runtime.NumCPU(),
		GoVersion: runtime.Version(), LoadAvgStart: loadAvg(),
		OpenFaaS: OpenFaaS{Version: OpenFaaSVersion},
		Notes:    []string{}, Paths: []PathResult{}, Hops: []Hop{}, Targets: []Target{},
	}
}

// finish turns the paths' histograms into results, hops and targets.
func (r *Report) finish(paths []*path) {
	r.LoadAvgEnd = loadAvg()
	for _, p := range paths {
		pr := PathResult{Path: p.name, Via: p.via, Requests: p.requests, OK: p.ok, Errors: p.requests - p.ok,
			ErrorsByKind: p.errs,
			P50us:        quantileUs(p, 50), P90us: quantileUs(p, 90), P99us: quantileUs(p, 99), P999us: quantileUs(p, 99.9),
			MaxUs: round1(float64(p.hist.Max()) / 1e3)}
		if p.hist.TotalCount() == 0 {
			pr.MaxUs = 0
		}
		// The histogram reports a bucket's top for a quantile; keep the
		// columns ordered when the slowest request sits in the p99.9 bucket.
		pr.MaxUs = max(pr.MaxUs, pr.P999us)
		if p.requests > 0 {
			pr.CPUPerRequestUs = round1(us(p.cpu) / float64(p.requests))
		}
		for _, q := range curvePercentiles {
			pr.curve = append(pr.curve, quantileUs(p, q))
		}
		r.Paths = append(r.Paths, pr)
	}
	if d, ok := r.path(PathDirect); ok {
		for i := range r.Paths {
			r.Paths[i].AddedP50us = round1(r.Paths[i].P50us - d.P50us)
			r.Paths[i].AddedP99us = round1(r.Paths[i].P99us - d.P99us)
		}
	}
	r.addHop(HopGantry, PathGantry, PathDirect)
	r.addHop(HopGantryInproc, PathGantryInproc, PathDirect)
	r.addHop(HopProvider, PathProvider, PathDirect)
	r.addHop(HopOpenFaaS, PathOpenFaaS, PathProvider)
	r.addHop(HopOpenFaaSStack, PathOpenFaaS, PathDirect)
	r.addTargets()
}

func quantileUs(p *path, q float64) float64 {
	if p.hist.TotalCount() == 0 {
		return 0
	}
	return round1(float64(p.hist.ValueAtQuantile(q)) / 1e3)
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

func (r *Report) path(name string) (PathResult, bool) {
	for _, p := range r.Paths {
		if p.Path == name && p.Requests > 0 {
			return p, true
		}
	}
	return PathResult{}, false
}

func (r *Report) addHop(name, pathName, base string) {
	p, ok1 := r.path(pathName)
	b, ok2 := r.path(base)
	if !ok1 || !ok2 {
		return
	}
	h := Hop{Hop: name, Path: pathName, Base: base, P50us: round1(p.P50us - b.P50us), P99us: round1(p.P99us - b.P99us),
		CPUPerRequestUs: round1(p.CPUPerRequestUs - b.CPUPerRequestUs)}
	type pair struct{ p, b *RoundRow }
	byRound := map[int]*pair{}
	for i := range r.Rounds {
		x := &r.Rounds[i]
		if x.Path != pathName && x.Path != base {
			continue
		}
		pr := byRound[x.Round]
		if pr == nil {
			pr = &pair{}
			byRound[x.Round] = pr
		}
		if x.Path == pathName {
			pr.p = x
		} else {
			pr.b = x
		}
	}
	var d50, d99 []float64
	for _, pr := range byRound {
		// A round cut short by an interrupt may lack one of the two.
		if pr.p != nil && pr.b != nil && pr.p.Requests > 0 && pr.b.Requests > 0 {
			d50 = append(d50, pr.p.P50us-pr.b.P50us)
			d99 = append(d99, pr.p.P99us-pr.b.P99us)
		}
	}
	h.RoundMedianP50us, h.RoundMedianP99us = round1(median(d50)), round1(median(d99))
	r.Hops = append(r.Hops, h)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// HopByName returns a hop measured in this run.
func (r *Report) HopByName(name string) (Hop, bool) {
	for _, h := range r.Hops {
		if h.Hop == name {
			return h, true
		}
	}
	return Hop{}, false
}

// addTargets checks the goals. The OpenFaaS comparison is against
// the OpenFaaS gateway's own hop (its path minus the provider path): the
// stricter reading, since its full path also carries the provider's hop,
// which Gantry's gateway does not need.
func (r *Report) addTargets() {
	g, okG := r.HopByName(HopGantry)
	if !okG {
		g, okG = r.HopByName(HopGantryInproc)
	}
	of, okO := r.HopByName(HopOpenFaaS)
	r.Targets = append(r.Targets,
		newTarget(TargetGantryP99, g.Hop, g.P99us, gantryP99LimitUs, okG, g.P99us),
		newTarget(TargetHalfP50, g.Hop, g.P50us, round1(openfaasHalfRatio*of.P50us), okG && okO, g.P50us, of.P50us),
		newTarget(TargetHalfP99, g.Hop, g.P99us, round1(openfaasHalfRatio*of.P99us), okG && okO, g.P99us, of.P99us))
}

// newTarget checks value < limit. A hop can only add latency, so a
// negative one among hops means machine noise outweighed it in this run:
// the target is then inconclusive rather than met.
func newTarget(name, hop string, value, limit float64, measured bool, hops ...float64) Target {
	t := Target{Target: name, Hop: hop, ValueUs: value, LimitUs: limit, Measured: measured, Conclusive: measured}
	for _, h := range hops {
		if h <= 0 {
			t.Conclusive = false
		}
	}
	t.Met = t.Conclusive && value < limit
	return t
}

// WriteTable prints the report for a terminal.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "gateway overhead: %.0f requests/s of %d-byte bodies, %.0f s per path in %.0f s rounds (seed %d), GOMAXPROCS %d on %d CPUs, %s\n",
		r.RatePerS, r.BodyBytes, r.DurationS, r.RoundS, r.Seed, r.GOMAXPROCS, r.NumCPU, r.GoVersion)
	if r.GOGC > 0 {
		fmt.Fprintf(&b, "both gateway processes run with GOGC=%d\n", r.GOGC)
	}
	fmt.Fprintf(&b, "load average: %s before, %s after\n", fmtLoad(r.LoadAvgStart), fmtLoad(r.LoadAvgEnd))
	if r.Interrupted {
		b.WriteString("INTERRUPTED: partial figures\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\trequests\terrors\tp50 µs\tp90 µs\tp99 µs\tmax µs\tadded p50 µs\tadded p99 µs\tCPU µs/req\t")
	for _, p := range r.Paths {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%+.1f\t%+.1f\t%.1f\t\n",
			p.Path, p.Requests, p.Errors, p.P50us, p.P90us, p.P99us, p.MaxUs, p.AddedP50us, p.AddedP99us, p.CPUPerRequestUs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "hop\tmeasured as\tp50 µs\tp99 µs\tround median p50 µs\tround median p99 µs\tCPU µs/req\t")
	for _, h := range r.Hops {
		fmt.Fprintf(tw, "%s\t%s - %s\t%+.1f\t%+.1f\t%+.1f\t%+.1f\t%+.1f\t\n", h.Hop, h.Path, h.Base, h.P50us, h.P99us,
			h.RoundMedianP50us, h.RoundMedianP99us, h.CPUPerRequestUs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "target %-58s %s\n", t.Target+":", t.verdict())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (t Target) verdict() string {
	var v string
	switch {
	case !t.Measured:
		return "not measured"
	case !t.Conclusive:
		v = fmt.Sprintf("inconclusive (%.1f µs against %.1f µs: a hop came out <= 0, so noise outweighed it)", t.ValueUs, t.LimitUs)
	case t.Met:
		v = fmt.Sprintf("met (%.1f µs < %.1f µs)", t.ValueUs, t.LimitUs)
	default:
		v = fmt.Sprintf("NOT met (%.1f µs >= %.1f µs)", t.ValueUs, t.LimitUs)
	}
	if t.Hop != HopGantry {
		v += " by the " + t.Hop + " hop"
	}
	return v
}

func fmtLoad(l [3]float64) string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }

// sortedKinds lists error kinds in a stable order for the CSV and markdown.
func sortedKinds(m map[string]int64) string {
	kinds := make([]string, 0, len(m))
	for k, n := range m {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	return strings.Join(kinds, " ")
}
