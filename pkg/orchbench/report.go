package orchbench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// RunStats is one controller's distribution of one stage in one case.
type RunStats struct {
	Controller string `json:"controller"`
	Mode       string `json:"mode"`
	Burst      int    `json:"burst"`
	Stage      string `json:"stage"`
	Summary
	// Missed counts scale-ups whose stage was not seen within the stage
	// timeout; they are not in the percentiles.
	Missed int `json:"missed"`
}

// Reduction is Gantry's median reduction against vanilla in one case.
type Reduction struct {
	Mode  string `json:"mode"`
	Burst int    `json:"burst"`
	Stage string `json:"stage"`
	// MedianReduction is 1 - median(gantry)/median(vanilla); null when
	// either has no sample.
	MedianReduction *float64 `json:"median_reduction"`
}

// stages are the rows of a report: the scale-up stages, and the
// requests' latency in a Knative run.
func (o Options) stages() []Stage {
	out := []Stage{StartsProcessing, PodsCreated, PodsReady}
	if o.Knative {
		out = append(out, RequestLatency)
	}
	return out
}

// Report is the benchmark's result: `--json` prints it.
type Report struct {
	Runs       []RunStats  `json:"runs"`
	Reductions []Reduction `json:"reductions"`
	// Churn is the interference each controller met; the clients create
	// RTResources and Deployments at different rates.
	Churn []Churn `json:"churn"`
	// PatchRTT is the round trip of the scale patches themselves: the
	// apiserver's latency for the benchmark's own writes under the churn.
	PatchRTT []RunStats `json:"patch_rtt"`
	// Breakdown splits Gantry's scale-ups into Components (the Stage field
	// names the component), from the controller's reconcile traces.
	Breakdown []RunStats `json:"breakdown"`
	// Requests and Triggers are the Knative run's traffic and the KPA's
	// scale-ups it caused (knative_report.go).
	Requests []RequestStats `json:"requests,omitempty"`
	// Audit are a Knative run's starts processing and pods created as the
	// paper times them, in the API server's audit log (knative_audit.go),
	// and AuditReductions Gantry's median reductions of them.
	Audit           []RunStats  `json:"audit,omitempty"`
	AuditReductions []Reduction `json:"audit_reductions,omitempty"`
	// AuditParts split the audit stages (AuditParts: the API server's own
	// time for the KPA's and the controllers' writes, the watch's delivery
	// of the KPA's write, starts processing from its reception);
	// AuditWriters give every logged write of the Services' namespace its
	// API server time, by verb, resource and user.
	AuditParts   []RunStats `json:"audit_parts,omitempty"`
	AuditWriters []RunStats `json:"audit_writers,omitempty"`
	// AuditWatches are the watches of the scale targets (Deployments,
	// ReplicaSets, RTResources) that ended before their timeout in each
	// case, by watcher ("resource (namespace) by user [agent]"), with
	// their lifetimes in ms: the API server cuts off a watcher that does
	// not keep up, after holding every other watcher of the resource up
	// to its time budget (knative_audit.go).
	AuditWatches []RunStats `json:"audit_watches,omitempty"`
	// APIServer is the API server's own metrics over each case's
	// iterations (knative_apiserver.go), on a control plane the run starts.
	APIServer []APIServerSeries `json:"apiserver,omitempty"`
	// Floor is, per arm and case, the floor responder's time from the
	// KPA's trigger to its one write (knative_floor.go): how fast a
	// controller that only watches and writes once starts processing under
	// that load, and the
	// reduction of vanilla's starts processing median it would allow.
	Floor []FloorStats `json:"floor,omitempty"`
	// TriggerPhase is where each arm's triggers fell on the
	// interference's grid and whether its burst was still being absorbed
	// (knative_phase.go).
	TriggerPhase []PhaseStats `json:"trigger_phase,omitempty"`
	// PerRepetition gives each repetition's medians and reductions, by
	// the audit log and by the watches (repetitions.go); the runs above
	// pool the repetitions.
	PerRepetition []RepetitionStats `json:"per_repetition,omitempty"`
	Triggers      []TriggerStats    `json:"triggers,omitempty"`
	Interrupted   bool              `json:"interrupted,omitempty"`
	// ControllerManager is where vanilla's kube-controller-manager spent
	// its time in each case (knative_kcm.go).
	ControllerManager []ControllerManagerStats `json:"controller_manager,omitempty"`
	// Warnings name the cases whose arms did not meet the same
	// interference (fairness.go): their reductions are not like with like.
	Warnings []string `json:"warnings,omitempty"`

	Options Options  `json:"-"`
	Samples []Sample `json:"-"`
}

func newReport(opts Options, samples []Sample, missed map[missKey]int) *Report {
	rep := &Report{Options: opts, Samples: samples, Runs: []RunStats{}, Reductions: []Reduction{}}
	for _, c := range opts.Cases {
		for _, ctl := range opts.Controllers {
			for _, st := range opts.stages() {
				rep.Runs = append(rep.Runs, RunStats{
					Controller: ctl, Mode: c.Mode, Burst: c.Burst, Stage: st.String(),
					Summary: Summarize(rep.values(ctl, c, st)), Missed: missed[missKey{ctl, c, st}],
				})
			}
		}
		if slices.Contains(opts.Controllers, Vanilla) && slices.Contains(opts.Controllers, Gantry) {
			for _, st := range opts.stages() {
				rep.Reductions = append(rep.Reductions, Reduction{Mode: c.Mode, Burst: c.Burst, Stage: st.String(),
					MedianReduction: finiteOrNil(MedianReduction(rep.values(Vanilla, c, st), rep.values(Gantry, c, st)))})
			}
		}
	}
	return rep
}

func finiteOrNil(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// values is one controller's samples of one stage in one case, in ms.
func (r *Report) values(ctl string, c Case, st Stage) []float64 {
	var out []float64
	for _, s := range r.Samples {
		if s.Controller == ctl && s.Mode == c.Mode && s.Burst == c.Burst && s.Stage == st {
			out = append(out, s.Ms)
		}
	}
	return out
}

// WriteTable prints the runs and reductions for a terminal.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "controller\tmode\tburst\tstage\tn\tmissed\tp50 ms\tp95 ms\tp99 ms\tmean ms\tstd ms\t")
	for _, s := range r.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", s.Controller, s.Mode, s.Burst,
			s.Stage, s.N, s.Missed, s.P50, s.P95, s.P99, s.Mean, s.Std)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Reductions) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "mode\tburst\tstage\tmedian reduction (gantry vs vanilla)\t")
		for _, d := range r.Reductions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", d.Mode, d.Burst, d.Stage, percent(d.MedianReduction))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Churn) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "controller\tmode\tburst\tchurn objects\tper s\tpatch p50 ms\tpatch p99 ms\t")
		for _, c := range r.Churn {
			pr := r.patchRTT(c.Controller, c.Mode, c.Burst)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t\n", c.Controller, c.Mode, c.Burst, c.Objects, c.PerSecond, pr.P50, pr.P99)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Breakdown) > 0 {
		fmt.Fprintln(w, "\nwhere Gantry's scale-ups spent their time (p50 / p99 ms per part, from the controller's traces):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "controller\tmode\tburst\tpart\tn\tp50 ms\tp99 ms\tmean ms\t")
		for _, s := range r.Breakdown {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t\n", s.Controller, s.Mode, s.Burst, s.Stage, s.N, s.P50, s.P99, s.Mean)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := r.writeKnativeTable(w); err != nil {
		return err
	}
	if r.Interrupted {
		_, err := fmt.Fprintln(w, "\ninterrupted: the figures above are partial")
		return err
	}
	return nil
}

func percent(x *float64) string {
	if x == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", *x*100)
}

func (r *Report) patchRTT(ctl, mode string, burst int) Summary {
	for _, p := range r.PatchRTT {
		if p.Controller == ctl && p.Mode == mode && p.Burst == burst {
			return p.Summary
		}
	}
	return Summary{}
}
