package report

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Section is free-form markdown placed before the per-condition tables.
type Section struct {
	Heading string
	Body    string
}

// Document is everything report.md shows.
type Document struct {
	Title    string
	Intro    string
	Sections []Section
	Records  []Record
	// OnlyCDFPerCondition leaves out the per-condition containers and SLO
	// bar charts, for reports with many conditions whose Figures summarise
	// them; the per-condition latency CDFs are still drawn.
	OnlyCDFPerCondition bool
	// NoPlots writes the data and the report without any PNG: an
	// interrupted run must exit within a second, and drawing hundreds of
	// plots takes tens of seconds on a loaded machine.
	NoPlots bool
	// PerFunction adds, for chains, a table per condition with every
	// function's metrics.
	PerFunction bool
	// Traces are drawn on one chart by WriteDir, when given, against
	// TracesYLabel (default "requests per second").
	Traces       []TraceSeries
	TracesYLabel string
	// Figures are summary charts drawn by WriteDir.
	Figures []Figure
	// Plots maps a group key to the plot files (relative paths) drawn for it.
	Plots map[string][]string
	// FigureFiles are the drawn Figures' relative paths, set by WriteDir.
	FigureFiles []string
}

// baseline is the policy other policies' containers are compared with: Atoll
// spawns a container per request in flight, the paper's reference point.
const baseline = "atoll"

// WriteMarkdown renders the document.
func WriteMarkdown(w io.Writer, doc Document) error {
	if len(doc.Records) == 0 {
		return ErrNoRecords
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", doc.Title)
	if doc.Intro != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(doc.Intro))
	}
	for _, s := range doc.Sections {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", s.Heading, strings.TrimSpace(s.Body))
	}
	if len(doc.FigureFiles) > 0 {
		b.WriteString("## Summary plots\n\n")
		for _, f := range doc.FigureFiles {
			fmt.Fprintf(&b, "![%s](%s)\n", f, f)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Results per condition\n\n")
	b.WriteString("Containers Δ is containers spawned against Atoll (negative is fewer). ")
	b.WriteString("SLO is the fraction of requests that finished within the app's SLO. ")
	b.WriteString("÷ oracle is the headline: each policy's mean live containers over the clairvoyant oracle's in the same condition. Fixed pool is the online frontier's best fixed pool in hindsight at that policy's SLO compliance (with the compliance it reaches), over the oracle too. Bound is the clairvoyant lower bound on mean live containers at 100% SLO compliance and floor the mean busy cores (docs/simulator.md); vs bound and vs floor are each policy's mean live containers against them.\n\n")
	for _, g := range GroupRecords(doc.Records) {
		writeGroup(&b, g, doc.Plots[g.Key()])
		if doc.PerFunction {
			writeFunctions(&b, g)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeGroup(b *strings.Builder, g Group, plots []string) {
	fmt.Fprintf(b, "### %s\n\n", g.Title())
	if slo := g.Runs[0].SLOMs; slo > 0 {
		fmt.Fprintf(b, "App SLO %.0f ms.\n\n", slo)
	}
	if r := g.Runs[0]; r.Bound > 0 {
		fmt.Fprintf(b, "Bound %.1f containers, floor %.1f busy cores (in the first policy's span).\n\n", r.Bound, r.WorkFloor)
	}
	if r := g.Runs[0]; r.Oracle > 0 {
		fmt.Fprintf(b, "Oracle %.1f mean live containers; bound %s of it, oracle-predicted %s (SLO %s).\n\n",
			r.Oracle, RatioCell(r, r.Bound), RatioCell(r, r.OraclePredicted), Compliance(r.OraclePredictedSLO))
	}
	b.WriteString("| policy | requests | containers spawned | Δ vs Atoll | avg live | ÷ oracle | fixed pool ÷ oracle (its SLO) | vs bound | vs floor | peak live | SLO | p50 ms | p99 ms | p99.9 ms | queue / cold / exec ms | jobs per container | energy kJ | cold starts |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	base, hasBase := g.Policy(baseline)
	for _, r := range g.Runs {
		delta := "—"
		if hasBase && r.Policy != baseline {
			delta = Percent(Change(float64(r.ContainersSpawned), float64(base.ContainersSpawned)))
		}
		pool := RatioCell(r, r.FixedPool)
		if r.FixedPool > 0 {
			pool += " (" + Compliance(r.FixedPoolSLO) + ")"
		}
		fmt.Fprintf(b, "| %s | %d | %d | %s | %.1f | %s | %s | %s | %s | %.0f | %s | %.0f | %.0f | %.0f | %.0f / %.0f / %.0f | %.1f | %.1f | %d |\n",
			r.Policy, r.Requests, r.ContainersSpawned, delta, r.AvgContainers, RatioCell(r, r.AvgContainers), pool,
			vsCell(r.Bound, r.VsBound()), vsCell(r.WorkFloor, r.VsFloor()), r.PeakContainers,
			Compliance(r.SLOCompliance), r.P50Ms, r.P99Ms, r.P999Ms,
			r.MeanQueueMs, r.MeanColdStartMs, r.MeanExecMs,
			r.JobsPerContainer, r.EnergyJ/1000, r.ColdStarts)
	}
	b.WriteString("\n")
	for _, p := range plots {
		fmt.Fprintf(b, "![%s](%s)\n", p, p)
	}
	if len(plots) > 0 {
		b.WriteString("\n")
	}
}

// writeFunctions breaks a chain's runs down by function; single-function
// apps have nothing to add to the app table.
func writeFunctions(b *strings.Builder, g Group) {
	if len(g.Runs[0].Functions) < 2 {
		return
	}
	b.WriteString("Per function:\n\n")
	b.WriteString("| policy | function | requests | containers spawned | avg live | peak live | p50 ms | p99 ms | queue / exec ms | jobs per container | cold starts |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range g.Runs {
		for _, f := range r.Functions {
			fmt.Fprintf(b, "| %s | %s | %d | %d | %.1f | %.0f | %.0f | %.0f | %.0f / %.0f | %.1f | %d |\n",
				r.Policy, f.Name, f.Requests, f.ContainersSpawned, f.AvgContainers, f.PeakContainers,
				f.P50Ms, f.P99Ms, f.MeanQueueMs, f.MeanExecMs, f.JobsPerContainer, f.ColdStarts)
		}
	}
	b.WriteString("\n")
}

// RatioCell formats v over the record's oracle ("1.07×"), or "—" when
// either is missing.
func RatioCell(r Record, v float64) string {
	if r.Oracle <= 0 || v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f×", v/r.Oracle)
}

// vsCell formats a distance to a bound, or "—" when there is none.
func vsCell(ref, frac float64) string {
	if ref <= 0 {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", frac*100)
}

// Change is (v - ref) / ref, or 0 when ref is 0.
func Change(v, ref float64) float64 {
	if ref == 0 {
		return 0
	}
	return (v - ref) / ref
}

// Percent formats a signed relative change, e.g. "-43%".
func Percent(frac float64) string {
	return fmt.Sprintf("%+.0f%%", frac*100)
}

// Compliance formats an SLO-compliance fraction with the precision the paper
// uses (two decimals of a percent). It truncates rather than rounds, so that
// 99.996% reads 99.99%: "100.00%" must mean that no request missed.
func Compliance(frac float64) string {
	// The epsilon absorbs binary error, e.g. 0.9997*10000 = 9996.9999...
	return fmt.Sprintf("%.2f%%", math.Floor(frac*10000+1e-6)/100)
}
