package experiment

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/report"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
)

// The ablation of issue 20's rules (`gantry sim --experiment ablation`,
// docs/experiments.md): gantry with each new rule undone, and the oracle
// with its plan-following and best fit undone, on the paper matrix and on
// an Azure Functions-format trace with minute-long spikes.
const (
	// AzureSpikesLabel names the bursty trace's runs.
	AzureSpikesLabel = "azure-spikes"
	// AzureSpikesRate is the bursty trace's mean rate; its spikes reach
	// about 2.7 times it. AzureSpikesNodes hold the peaks of every app.
	AzureSpikesRate  = 100.0
	AzureSpikesNodes = 12
	// DefaultAzureSpikesDuration is each bursty run's simulated time.
	DefaultAzureSpikesDuration = 20 * time.Minute
	// AblationFile is the summary table's JSON in the output folder.
	AblationFile = "ablation.json"
)

// AblationVariants are the runs of the ablation, in table order: gantry
// with every rule, each rule off alone, every rule off (gantry-stream,
// the policy before issue 20), then the oracle the same way.
func AblationVariants() []string {
	return []string{
		"gantry",
		"gantry-no-slo-sizing",    // the stream cap a + sqrt(D·a) instead of M/G/n sizing for the SLO target
		"gantry-no-age-retire",    // quarter-steps at window boundaries instead of idle-age retirement
		"gantry-no-burst-alarm",   // no on-arrival burst alarm (and, as in gantry, no warm buffer)
		"gantry-warm-buffer",      // the warm buffer put back (gantry has none since 2 December)
		"gantry-panic",            // the panic rule's per-tick test and multiplied, held target instead of the alarm's additive excess
		"gantry-no-refused",       // a request the full queue refuses is not counted as demand
		"gantry-no-steady-excess", // no retirement of the excess above the target on steady load
		"gantry-no-trend",         // no trend (Holt) added to the predicted rate on steady load
		"gantry-no-steady-mean",   // the steadiness test's slow dispersion an EWMA started at the first window
		"gantry-no-rate-floor",    // no floor (the EWMA's own error) on the rate error the sizing averages over
		"gantry-no-own-gate",      // the trend gated on the EWMA's dispersion, not on its own errors'
		"gantry-no-periodic",      // no pre-warm ahead of a step that recurs at a period, nor the seasonal prediction
		"gantry-no-seasonal",      // the pre-warm, but the EWMA's prediction while a period holds
		"gantry-no-season-level",  // the seasonal prediction not scaled by the level's drift over the period
		"gantry-no-season-disp",   // the sizing's margin read from the EWMA's errors while a period holds, not the seasonal prediction's own
		"gantry-no-step-end",      // no retirement at once when the seasonal prediction steps down: idle-age retirement alone
		"gantry-no-joint-chain",   // a chain's functions sized one at a time on their SLO shares, not on a joint split of the end-to-end slack
		"gantry-no-share-round",   // a target of at most 4 containers held whole, not time-shared between n-1 and n within ε
		"gantry-no-startup-size",  // no sizing before the first window closes: the prewarm and the reactive rule until then
		"gantry-miss-budget",      // the misses the driver reports fed back into ε over a 2-minute span (not in gantry)
		"gantry-fast-fall",        // a fall of the window counts followed with weight 0.9 on bursty load (not in gantry)
		"gantry-disp-no-bursts",   // the sizing's rate error leaves out the windows a burst alarm answered (not in gantry)
		"gantry-bursty-alarms",    // and the burst detectors allow 360 false alarms an hour on unsteady load (not in gantry)
		"gantry-startup-room",     // the sizing asked for 40% more than the predicted rate until the load's dispersion is measured (not in gantry)
		"gantry-disp-recover",     // each window's sample of the sizing's rate error clipped at 10 times the estimate (not in gantry)
		"gantry-stream",           // every rule off
		"oracle",
		"oracle-first-fit", // plan first fit only, no best fit
		"oracle-no-follow", // and hold the plan's counts instead of following it
	}
}

// AblationPlan sizes the ablation.
type AblationPlan struct {
	// Paper is the matrix; its Policies are the variants.
	Paper PaperPlan
	// SpikesDuration is each bursty run's simulated time; 0 leaves the
	// bursty trace out.
	SpikesDuration time.Duration
}

// DefaultAblationPlan is what `gantry sim --experiment ablation` runs.
func DefaultAblationPlan() AblationPlan {
	p := DefaultPaperPlan()
	p.Policies, p.ChainAblation = AblationVariants(), false
	return AblationPlan{Paper: p, SpikesDuration: DefaultAzureSpikesDuration}
}

// AblationJobs is the paper matrix under every variant, then every app
// with heavy inputs under the Azure-format spikes.
func AblationJobs(p AblationPlan) ([]Job, error) {
	p.Paper.ChainAblation = false
	jobs, err := PaperJobs(p.Paper)
	if err != nil {
		return nil, err
	}
	if p.SpikesDuration <= 0 {
		return jobs, nil
	}
	tr, err := AzureSpikes(AzureSpikesRate, p.SpikesDuration, p.Paper.Seed)
	if err != nil {
		return nil, err
	}
	st := scaledTrace{trace: tr, label: AzureSpikesLabel, scale: ScaleReal, nodes: AzureSpikesNodes}
	for _, app := range PaperApps {
		more, err := conditionJobs(p.Paper, app, "heavy", st)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, more...)
	}
	return jobs, nil
}

// AzureSpikes is a day of one function in the Azure Functions 2019
// per-minute format (what --trace-file reads), read back with
// trace.ReadAzure: a diurnal base of 40-minute period with, every third
// minute, a minute-long spike of three times the base; cut to d and
// scaled to a mean of rate. The seed shifts the phase and the spikes.
func AzureSpikes(rate float64, d time.Duration, seed uint64) (trace.Trace, error) {
	if d <= 0 || d > 24*time.Hour {
		return trace.Trace{}, fmt.Errorf("%w: azure-spikes duration %v must be in (0, 24h]", ErrBadPlan, d)
	}
	var b strings.Builder
	b.WriteString("HashOwner,HashApp,HashFunction,Trigger")
	for m := range 1440 {
		fmt.Fprintf(&b, ",%d", m+1)
	}
	b.WriteString("\nowner,app,fn,http")
	for m := range 1440 {
		base := 600 * (1 + 0.5*math.Sin(2*math.Pi*float64(m)/40+float64(seed)))
		if (m+int(seed))%3 == 0 {
			base *= 3
		}
		fmt.Fprintf(&b, ",%.0f", base)
	}
	b.WriteString("\n")
	tr, err := trace.ReadAzure(strings.NewReader(b.String()), "fn")
	if err != nil {
		return trace.Trace{}, err
	}
	tr = tr.Truncate(d)
	tr = tr.Scale(rate / tr.Mean())
	tr.Name = AzureSpikesLabel
	return tr, nil
}

// AblationRow is one variant's figures over one split of the runs.
type AblationRow struct {
	Split   string `json:"split"`
	Variant string `json:"variant"`
	Runs    int    `json:"runs"`
	// VsOracle is the mean over the runs of mean live containers over the
	// oracle's (the headline's unit); VsReference the same over gantry's,
	// or over the oracle's for the oracle's variants.
	VsOracle    float64 `json:"vs_oracle"`
	VsReference float64 `json:"vs_reference"`
	// SLOMean and SLOWorst are the runs' mean and lowest compliance.
	SLOMean  float64 `json:"slo_mean"`
	SLOWorst float64 `json:"slo_worst"`
	// Missed is the requests that missed their SLO (rejected included),
	// Spawned the containers started, summed over the runs.
	Missed  int64 `json:"missed"`
	Spawned int64 `json:"spawned"`
}

// ablationSplits groups the runs by trace: stable load, Twitter at the
// two scales, and the Azure-format spikes.
var ablationSplits = []struct {
	name   string
	traces []string
}{
	{"stable", []string{"poisson", "wiki"}},
	{"twitter", []string{"twitter"}},
	{LargeTraceLabel, []string{LargeTraceLabel}},
	{AzureSpikesLabel, []string{AzureSpikesLabel}},
}

// AblationRows summarises the records per split and variant.
func AblationRows(records []report.Record, variants []string) []AblationRow {
	// Each condition's gantry and oracle, the variants' references.
	key := func(r report.Record) string { return r.App + "/" + r.Dist + "/" + r.Trace + "/" + r.Scale }
	base := map[string]map[string]float64{"gantry": {}, "oracle": {}}
	for _, r := range records {
		if m, ok := base[r.Policy]; ok {
			m[key(r)] = r.AvgContainers
		}
	}
	var rows []AblationRow
	for _, sp := range ablationSplits {
		for _, v := range variants {
			ref := "gantry"
			if sim.IsOracle(v) {
				ref = "oracle"
			}
			row := AblationRow{Split: sp.name, Variant: v, SLOWorst: 1}
			var vsOracle, vsBase float64
			var nOracle, nBase int
			for _, r := range records {
				if r.Policy != v || !slices.Contains(sp.traces, r.Trace) {
					continue
				}
				row.Runs++
				row.SLOMean += r.SLOCompliance
				row.SLOWorst = min(row.SLOWorst, r.SLOCompliance)
				row.Missed += int64(math.Round(float64(r.Requests) * (1 - r.SLOCompliance)))
				row.Spawned += r.ContainersSpawned
				if r.Oracle > 0 {
					vsOracle += r.AvgContainers / r.Oracle
					nOracle++
				}
				if b := base[ref][key(r)]; b > 0 {
					vsBase += r.AvgContainers / b
					nBase++
				}
			}
			if row.Runs == 0 {
				continue
			}
			row.SLOMean /= float64(row.Runs)
			if nOracle > 0 {
				row.VsOracle = vsOracle / float64(nOracle)
			}
			if nBase > 0 {
				row.VsReference = vsBase / float64(nBase)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// WriteAblationTable writes the rows as one markdown table per split.
func WriteAblationTable(w io.Writer, rows []AblationRow) error {
	var b strings.Builder
	split := ""
	for _, r := range rows {
		if r.Split != split {
			split = r.Split
			fmt.Fprintf(&b, "\n%s:\n\n", split)
			b.WriteString("| variant | runs | live ÷ oracle | live ÷ reference | SLO mean | SLO worst | missed | spawned |\n")
			b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d | %d |\n", r.Variant, r.Runs, ratio(r.VsOracle), ratio(r.VsReference),
			report.Compliance(r.SLOMean), report.Compliance(r.SLOWorst), r.Missed, r.Spawned)
	}
	_, err := io.WriteString(w, strings.TrimPrefix(b.String(), "\n"))
	return err
}

func ratio(v float64) string {
	if v <= 0 {
		return na
	}
	return fmt.Sprintf("%.3f", v)
}

// AblationMeta is what the ablation report says of its run.
type AblationMeta struct {
	Plan AblationPlan
	Runs int
	Wall time.Duration
}

// AblationDocument is the report: the table per split, then every run.
func AblationDocument(records []report.Record, rows []AblationRow, meta AblationMeta) report.Document {
	var table strings.Builder
	_ = WriteAblationTable(&table, rows)
	p := meta.Plan
	intro := fmt.Sprintf("Issue 20's rules, each undone alone (gantry) and the oracle's plan-following and best fit undone, "+
		"on the paper matrix (seed %d, %v per real-scale run, %v per large-scale run) and on the Azure Functions-format "+
		"spikes (every app, heavy inputs, mean %.0f requests/s, %d nodes, %v). %d runs in %v. "+
		"Ratios are means over the split's runs of each run's mean live containers over its condition's oracle, and over "+
		"its reference's: gantry for gantry's variants, the oracle for the oracle's. Missed requests include the rejected.",
		p.Paper.Seed, p.Paper.Duration, p.Paper.LargeDuration, AzureSpikesRate, AzureSpikesNodes, p.SpikesDuration,
		meta.Runs, meta.Wall.Round(time.Second))
	return report.Document{
		Title: "Gantry: the ablation of issue 20's rules", Intro: intro, Records: records, NoPlots: true,
		Sections: []report.Section{{Heading: "Each rule off", Body: table.String()}},
	}
}

// WriteAblationJSON writes the rows into dir as AblationFile.
func WriteAblationJSON(dir string, rows []AblationRow) error {
	f, err := os.Create(filepath.Join(dir, AblationFile))
	if err != nil {
		return err
	}
	if err := WriteAblationRowsJSON(f, rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteAblationRowsJSON writes {"rows": [...]}.
func WriteAblationRowsJSON(w io.Writer, rows []AblationRow) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Rows []AblationRow `json:"rows"`
	}{rows})
}
