package experiment

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/report"
)

// claim is one published figure set beside ours. ours computes our value
// for a subject policy; the paper's claims are about Cypress (or IS Batch),
// and the Gantry column substitutes our own policy where the subject is
// Cypress.
type claim struct {
	figure, condition, paper string
	subject                  string
	ours                     func(ix index, subject string) string
}

const na = "n/a"

func changeClaim(c cond, m metric, ref ...string) func(index, string) string {
	return func(ix index, p string) string {
		v, ok := ix.change(c, m, p, ref...)
		if !ok {
			return na
		}
		return report.Percent(v)
	}
}

// containersClaim shows the change in containers spawned (the paper's
// measure) and in mean live containers (which does not count churn).
func containersClaim(c cond, ref ...string) func(index, string) string {
	return func(ix index, p string) string {
		spawned := changeClaim(c, containers, ref...)(ix, p)
		live := changeClaim(c, avgLive, ref...)(ix, p)
		if spawned == na {
			return na
		}
		return spawned + " spawned, " + live + " live"
	}
}

// sloClaim shows the subject's mean compliance against each reference's.
func sloClaim(c cond, ref ...string) func(index, string) string {
	return func(ix index, p string) string {
		v, ok := ix.mean(c, compliance, p)
		if !ok {
			return na
		}
		parts := []string{report.Compliance(v)}
		for _, r := range ref {
			if rv, ok := ix.mean(c, compliance, r); ok {
				parts = append(parts, fmt.Sprintf("%s %s", r, report.Compliance(rv)))
			}
		}
		return strings.Join(parts, " vs ")
	}
}

func minSLOClaim(c cond) func(index, string) string {
	return func(ix index, p string) string {
		v, ok := ix.minimum(c, compliance, p)
		if !ok {
			return na
		}
		return "min " + report.Compliance(v)
	}
}

// p99Claim shows by how much p99 exceeds the SLO, worst cell of the condition.
func p99Claim(c cond) func(index, string) string {
	return func(ix index, p string) string {
		v, ok := ix.maximum(c, p99OverSLO, p)
		switch {
		case !ok:
			return na
		case v == 0:
			return "p99 within SLO"
		default:
			return fmt.Sprintf("p99 %s over SLO", report.Percent(v))
		}
	}
}

func stableCond(apps []string, dists []string) cond {
	return cond{apps: apps, dists: dists, traces: stable}
}

// paperClaims lists the Cypress figures of shared/reference/paper-figures.md
// that the matrix can reproduce. "Stable" means the Poisson and Wiki traces
// at real-system scale, which is what the paper's figures 9-17 average over.
func paperClaims() []claim {
	ic, sa := []string{"image-compression"}, []string{"sentiment-analysis"}
	ec, at := []string{"email-categorization"}, []string{"audio-translation"}
	medial := []string{"medial"}
	kf := []string{"kraken", "fifer"}
	twHeavy := cond{apps: allApps, dists: heavy, traces: realTwit}
	twLight := cond{apps: allApps, dists: light, traces: realTwit}
	lgHeavy := cond{apps: allApps, dists: heavy, traces: largeOnly}
	lgLight := cond{apps: allApps, dists: light, traces: largeOnly}
	return []claim{
		{"Fig. 1a", "heavy, all apps, stable: IS Batch containers vs No Batch (Atoll)", "-30%", "isbatch", containersClaim(stableCond(allApps, heavy), "atoll")},
		{"Fig. 1a", "heavy, all apps, stable: SLO compliance", "IS Batch 99.57% vs 99.99%", "isbatch", sloClaim(stableCond(allApps, heavy), "atoll")},
		{"Fig. 1b", "light, all apps, stable: IS Batch containers vs No Batch (Atoll)", "-41%", "isbatch", containersClaim(stableCond(allApps, light), "atoll")},
		{"Fig. 1b", "light, all apps, stable: Static Batch (Kraken) containers vs IS Batch", "-13%", "kraken", containersClaim(stableCond(allApps, light), "isbatch")},
		{"Fig. 1b", "light, all apps, stable: SLO compliance", "IS Batch 99.35%, IS(Batch+RR) 99.98%, No Batch 99.99%, Static 97.78%", "isbatch", sloClaim(stableCond(allApps, light), "cypress", "atoll", "kraken")},
		{"Fig. 11a", "Image Compression, heavy, stable: containers vs Atoll", "-43%", "cypress", containersClaim(stableCond(ic, heavy), "atoll")},
		{"Fig. 11b", "Image Compression, light, stable: containers vs Atoll", "-66%", "cypress", containersClaim(stableCond(ic, light), "atoll")},
		{"Fig. 9a", "Sentiment Analysis, heavy, stable: containers vs Kraken/Fifer", "-34%", "cypress", containersClaim(stableCond(sa, heavy), kf...)},
		{"Fig. 9a", "Sentiment Analysis, heavy, stable: SLO compliance", "same as Kraken/Fifer", "cypress", sloClaim(stableCond(sa, heavy), kf...)},
		{"Fig. 11c", "Image Compression, medial, stable: containers vs Kraken/Fifer", "+9%", "cypress", containersClaim(stableCond(ic, medial), kf...)},
		{"Fig. 11c", "Image Compression, medial, stable: SLO compliance", "99.99% vs 98.05%", "cypress", sloClaim(stableCond(ic, medial), kf...)},
		{"Figs. 12-13", "chain apps, all distributions, stable: SLO compliance", "≥ 99.97%", "cypress", minSLOClaim(stableCond(chainApps, allDists))},
		{"Fig. 13b", "Audio Translation, light, stable: containers vs Atoll", "-33%", "cypress", containersClaim(stableCond(at, light), "atoll")},
		{"Fig. 12a", "Email Categorization, heavy, stable: containers vs Fifer", "-30%", "cypress", containersClaim(stableCond(ec, heavy), "fifer")},
		{"Fig. 12b", "Email Categorization, light, stable: containers vs Fifer", "+8%", "cypress", containersClaim(stableCond(ec, light), "fifer")},
		{"Fig. 12b", "Email Categorization, light, stable: SLO compliance", "99.97% vs 99.13%", "cypress", sloClaim(stableCond(ec, light), "fifer")},
		{"Fig. 13a", "Audio Translation, heavy, stable: containers vs Kraken", "-21%", "cypress", containersClaim(stableCond(at, heavy), "kraken")},
		{"Fig. 13a", "Audio Translation, heavy, stable: SLO compliance", "99.98% vs 99.31%", "cypress", sloClaim(stableCond(at, heavy), "kraken")},
		{"§6.1.2", "all apps and distributions, stable: containers vs Atoll", "-40% on average", "cypress", containersClaim(stableCond(allApps, allDists), "atoll")},
		{"Fig. 14", "all apps and distributions, stable: mean response time vs Atoll", "+4%", "cypress", changeClaim(stableCond(allApps, allDists), response, "atoll")},
		{"Fig. 14", "all apps and distributions, stable: mean response time vs Fifer, Kraken, IS Batch", "-15%, -10%, -6%", "cypress", multiChange(stableCond(allApps, allDists), response, "fifer", "kraken", "isbatch")},
		{"Fig. 15", "all apps and distributions, stable: worst p99 against the SLO", "Cypress and Atoll within SLO; Kraken/Fifer +50%", "cypress", p99Claim(stableCond(allApps, allDists))},
		{"Fig. 16", "all apps, heavy, stable: jobs per container vs Atoll", "+52%", "cypress", changeClaim(stableCond(allApps, heavy), jobsPer, "atoll")},
		{"Fig. 16", "all apps, light, stable: jobs per container vs Atoll", "+71%", "cypress", changeClaim(stableCond(allApps, light), jobsPer, "atoll")},
		{"Fig. 16", "all apps, heavy / light, stable: SLO compliance", "99.99% / 99.98% (IS Batch 99.82% / 99.80%)", "cypress", pairSLO(stableCond(allApps, heavy), stableCond(allApps, light))},
		{"Fig. 17a", "all apps, heavy, stable: energy vs Atoll", "-19%", "cypress", changeClaim(stableCond(allApps, heavy), energy, "atoll")},
		{"Fig. 17b", "all apps, light, stable: energy vs Atoll", "-22%", "cypress", changeClaim(stableCond(allApps, light), energy, "atoll")},
		{"Fig. 17a", "all apps, heavy, stable: energy vs Kraken, Fifer", "-23%, -19%", "cypress", multiChange(stableCond(allApps, heavy), energy, "kraken", "fifer")},
		{"Fig. 18a", "Twitter (peak 250 rps, 288 cores), heavy, all apps: containers vs Atoll", "-34%", "cypress", containersClaim(twHeavy, "atoll")},
		{"Fig. 18a", "Twitter (peak 250 rps, 288 cores), heavy, all apps: SLO compliance", "99.72% vs Atoll/Kraken/Fifer 97.46%, IS Batch 97.65%", "cypress", sloClaim(twHeavy, "atoll", "kraken", "fifer", "isbatch")},
		{"Fig. 18b", "Twitter (peak 250 rps, 288 cores), light, all apps: SLO compliance", "99.91%", "cypress", sloClaim(twLight)},
		{"Table 4", "Twitter (peak 250 rps), heavy and light: worst p99 against the SLO", "Cypress within SLO; Atoll +57%, Kraken/Fifer +89%, IS Batch +55%", "cypress", p99Claim(cond{apps: allApps, dists: []string{"heavy", "light"}, traces: realTwit})},
		{"Fig. 18a (large)", "Twitter peak 5450 rps, 6384 cores, heavy: containers vs Atoll", "-34%", "cypress", containersClaim(lgHeavy, "atoll")},
		{"Fig. 18a (large)", "Twitter peak 5450 rps, 6384 cores, heavy: SLO compliance", "99.72%", "cypress", sloClaim(lgHeavy, "atoll", "kraken", "fifer", "isbatch")},
		{"Fig. 18b (large)", "Twitter peak 5450 rps, 6384 cores, light: SLO compliance", "99.91%", "cypress", sloClaim(lgLight)},
	}
}

func multiChange(c cond, m metric, refs ...string) func(index, string) string {
	return func(ix index, p string) string {
		parts := make([]string, len(refs))
		for i, r := range refs {
			parts[i] = changeClaim(c, m, r)(ix, p)
		}
		return strings.Join(parts, ", ")
	}
}

func pairSLO(a, b cond) func(index, string) string {
	return func(ix index, p string) string {
		return sloClaim(a)(ix, p) + " / " + sloClaim(b)(ix, p)
	}
}

// ourPolicy is Gantry's own policy, shown beside Cypress in every claim.
const ourPolicy = "gantry"

func claimsTable(ix index) string {
	var b strings.Builder
	b.WriteString("| Paper figure | Condition | Paper | Ours (same policy) | Ours (gantry) |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, c := range paperClaims() {
		gantry := "—"
		if c.subject == "cypress" {
			gantry = c.ours(ix, ourPolicy)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s: %s | %s |\n",
			c.figure, c.condition, c.paper, c.subject, c.ours(ix, c.subject), gantry)
	}
	return b.String()
}

// perPolicyTable is one row per policy and one column per distribution.
func perPolicyTable(ix index, policies []string, header string, cell func(c cond, p string) string, traces []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | heavy | medial | light | all |\n|---|--:|--:|--:|--:|\n", header)
	for _, p := range policies {
		fmt.Fprintf(&b, "| %s", p)
		for _, d := range [][]string{heavy, {"medial"}, light, allDists} {
			fmt.Fprintf(&b, " | %s", cell(cond{apps: allApps, dists: d, traces: traces}, p))
		}
		b.WriteString(" |\n")
	}
	return b.String()
}

func changeCell(ix index, m metric) func(cond, string) string {
	return func(c cond, p string) string {
		if p == "atoll" {
			return "—"
		}
		return changeClaim(c, m, "atoll")(ix, p)
	}
}

func avgLive(r report.Record) float64 { return r.AvgContainers }

func sloCell(ix index) func(cond, string) string {
	return func(c cond, p string) string {
		v, ok := ix.mean(c, compliance, p)
		lo, _ := ix.minimum(c, compliance, p)
		if !ok {
			return na
		}
		return fmt.Sprintf("%s (min %s)", report.Compliance(v), report.Compliance(lo))
	}
}

// PaperMeta is how the matrix was run, for the report's preamble.
type PaperMeta struct {
	Plan PaperPlan
	// Jobs, when set, let the report draw the traces the matrix used.
	Jobs    []Job
	Runs    int
	Wall    time.Duration
	Workers int
}

// PaperDocument builds report.md for the paper matrix.
func PaperDocument(records []report.Record, meta PaperMeta) report.Document {
	ix := newIndex(records)
	policies := withoutChainAblations(policiesIn(records))
	sections := []report.Section{
		{Heading: "Headline: mean live containers over the oracle's", Body: headlineIntro + headlineTable(ix, policies)},
		{Heading: "Distance to the clairvoyant bound", Body: boundIntro + boundTable(ix, policies)},
		{Heading: "Containers against Atoll, per policy", Body: containersIntro +
			perPolicyTable(ix, policies, "spawned (stable traces)", changeCell(ix, containers), stable) +
			"\n" + perPolicyTable(ix, policies, "spawned (Twitter, 288 cores)", changeCell(ix, containers), realTwit) +
			"\n" + perPolicyTable(ix, policies, "spawned (Twitter, 6384 cores)", changeCell(ix, containers), largeOnly) +
			"\n" + avgLiveIntro +
			perPolicyTable(ix, policies, "mean live (stable traces)", changeCell(ix, avgLive), stable) +
			"\n" + perPolicyTable(ix, policies, "mean live (Twitter, 6384 cores)", changeCell(ix, avgLive), largeOnly)},
		{Heading: "SLO compliance per policy", Body: sloIntro + perPolicyTable(ix, policies, "policy (stable traces)", sloCell(ix), stable) +
			"\n" + perPolicyTable(ix, policies, "policy (Twitter, 288 cores)", sloCell(ix), realTwit) +
			"\n" + perPolicyTable(ix, policies, "policy (Twitter, 6384 cores)", sloCell(ix), largeOnly)},
		{Heading: "Beside the paper's published figures", Body: besideIntro + claimsTable(ix)},
	}
	if body, ok := chainAblationBody(ix, policiesIn(records)); ok {
		sections = append(sections, report.Section{Heading: "Chained prediction (figure 2)", Body: body})
	}
	return report.Document{
		Title:    "Gantry: the Cypress paper matrix in simulation",
		Intro:    paperIntro(meta),
		Sections: sections,
		Records:  records,
		Figures:  paperFigures(ix, policies),
		// 60 conditions x 3 bar charts would bury the summary figures;
		// the tables give every condition's containers and SLO.
		OnlyCDFPerCondition: true,
		Traces:              Traces(meta.Jobs, true),
		TracesYLabel:        "arrival rate / mean rate",
	}
}

const headlineIntro = "Each policy's mean live containers over the clairvoyant `oracle`'s in the same cell (it follows its plan and meets every SLO any policy can; docs/simulator.md), the mean over the cells of each split (stable being Poisson and Wiki at 288 cores), beside the clairvoyant bound and the online frontier on the same scale: the best fixed pool in hindsight at that policy's own SLO compliance, and `oracle-predicted`, which knows the rate but not the arrivals (its own SLO compliance in the last column).\n\n"

// ratioOf is a value of a record over the cell's oracle (NaN without one).
func ratioOf(v func(report.Record) float64) metric {
	return func(r report.Record) float64 {
		if r.Oracle <= 0 {
			return math.NaN()
		}
		return v(r) / r.Oracle
	}
}

// headlineTable is the headline: each policy's mean live containers over
// the oracle's, with the bound and the online frontier beside it.
func headlineTable(ix index, policies []string) string {
	splits := [][]string{stable, realTwit, largeOnly}
	split := func(m metric, p string, f func(float64, bool) string) string {
		var parts []string
		for _, tr := range splits {
			parts = append(parts, f(ix.mean(cond{apps: allApps, dists: allDists, traces: tr}, m, p)))
		}
		return strings.Join(parts, " / ")
	}
	times := func(v float64, ok bool) string {
		if !ok {
			return na
		}
		return fmt.Sprintf("%.3f×", v)
	}
	pct := func(v float64, ok bool) string {
		if !ok {
			return na
		}
		return report.Compliance(v)
	}
	live := ratioOf(func(r report.Record) float64 { return r.AvgContainers })
	pool := ratioOf(func(r report.Record) float64 { return r.FixedPool })
	var b strings.Builder
	b.WriteString("| policy | mean live ÷ oracle: stable / Twitter 288 / Twitter 6384 | fixed pool at its SLO ÷ oracle | SLO compliance |\n|---|--:|--:|--:|\n")
	for _, p := range policies {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", p, split(live, p, times), split(pool, p, times), split(compliance, p, pct))
	}
	if len(policies) > 0 {
		p := policies[0]
		fmt.Fprintf(&b, "| *bound* | %s | | |\n", split(ratioOf(func(r report.Record) float64 { return r.Bound }), p, times))
		fmt.Fprintf(&b, "| *oracle-predicted* (frontier) | %s | | %s |\n", split(ratioOf(func(r report.Record) float64 { return r.OraclePredicted }), p, times),
			split(func(r report.Record) float64 { return r.OraclePredictedSLO }, p, pct))
	}
	return b.String()
}

const boundIntro = "Each policy's mean live containers against the clairvoyant lower bound at 100% SLO compliance and against the work floor (the mean busy cores), both computed from the run's own requests (docs/simulator.md, \"The clairvoyant bound\"); the mean over the cells of each split, stable being Poisson and Wiki at 288 cores. The bound holds only for runs that meet every SLO, so read the distance beside the SLO columns. `oracle` is the constructive clairvoyant schedule, an achievable upper bound on the fewest containers where it reaches 100%.\n\n"

// boundTable is the headline table: distance to the bound and the floor,
// SLO compliance and spawned containers, per policy and split.
func boundTable(ix index, policies []string) string {
	splits := [][]string{stable, realTwit, largeOnly}
	var b strings.Builder
	b.WriteString("| policy | vs bound: stable / Twitter 288 / Twitter 6384 | vs floor | SLO compliance (worst cell) | spawned |\n|---|--:|--:|--:|--:|\n")
	cell := func(m metric, p string, f func(float64, bool) string) string {
		var parts []string
		for _, tr := range splits {
			parts = append(parts, f(ix.mean(cond{apps: allApps, dists: allDists, traces: tr}, m, p)))
		}
		return strings.Join(parts, " / ")
	}
	pct := func(v float64, ok bool) string {
		if !ok {
			return na
		}
		return fmt.Sprintf("%+.1f%%", v*100)
	}
	for _, p := range policies {
		var slo []string
		for _, tr := range splits {
			c := cond{apps: allApps, dists: allDists, traces: tr}
			v, ok := ix.mean(c, compliance, p)
			lo, _ := ix.minimum(c, compliance, p)
			if !ok {
				slo = append(slo, na)
				continue
			}
			slo = append(slo, fmt.Sprintf("%s (%s)", report.Compliance(v), report.Compliance(lo)))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", p, cell(vsBound, p, pct), cell(vsFloor, p, pct),
			strings.Join(slo, " / "), cell(containers, p, func(v float64, ok bool) string {
				if !ok {
					return na
				}
				return fmt.Sprintf("%.0f", v)
			}))
	}
	return b.String()
}

const containersIntro = "Mean over the five apps of the change in containers spawned against Atoll (negative is fewer), per input-size distribution. Spawned counts every container started during the run, as the paper's figures do.\n\n"

const avgLiveIntro = "Spawned also counts churn: a policy that retires idle containers and starts new ones later spawns more than it ever holds. The mean number of live containers over the run measures the cores held instead:\n\n"

const sloIntro = "Mean (and worst) fraction of requests that finished within the app SLO, over the five apps.\n\n"

const besideIntro = `Each row names the paper figure and its condition (shared/reference/paper-figures.md). "Stable" is the mean over the Poisson (250 rps) and Wiki (mean 302 rps) traces on 6 × 48 cores, which is what the paper's figures average over. Our apps' execution-time models are ours (docs/experiments.md), so the absolute numbers differ; the directions and rough sizes are what to compare. The Gantry column puts our own policy where the paper's claim is about Cypress.

`

func paperIntro(m PaperMeta) string {
	p := m.Plan
	var b strings.Builder
	fmt.Fprintf(&b, "%d runs: %d apps × %d input-size distributions × {Poisson %.0f rps, Wiki mean %.0f rps, Twitter peak %.0f rps} × %d policies on %d nodes × %d cores",
		m.Runs, len(PaperApps), len(PaperDists), PoissonRate, WikiMean, TwitterRealPeak, len(p.Policies), RealNodes, CoresPerNode)
	if !p.SkipLarge {
		fmt.Fprintf(&b, ", plus Twitter peaking at %.0f rps (mean %.0f) on %d nodes × %d cores", TwitterLargePeak, TwitterLargeMean, LargeNodes, CoresPerNode)
	}
	fmt.Fprintf(&b, ".\n\nSimulated time per run: %v at real-system scale", p.Duration)
	if !p.SkipLarge {
		fmt.Fprintf(&b, ", %v at large scale", p.LargeDuration)
	}
	fmt.Fprintf(&b, ". Seed %d. ", p.Seed)
	if m.Wall > 0 {
		fmt.Fprintf(&b, "Wall time %v on %d workers.", m.Wall.Round(time.Second), m.Workers)
	}
	return b.String()
}

// paperFigures are the summary charts of the matrix: containers against
// Atoll and SLO misses per policy and distribution, for the stable traces
// and for the large-scale Twitter trace.
func paperFigures(ix index, policies []string) []report.Figure {
	figs := []report.Figure{headlineFigure(ix, policies)}
	others := without(policies, "atoll")
	for _, set := range []struct {
		file, what string
		traces     []string
	}{
		{"summary-stable", "stable traces, 288 cores", stable},
		{"summary-twitter-large", "Twitter peak 5450 rps, 6384 cores", largeOnly},
	} {
		if len(others) > 0 {
			figs = append(figs,
				distFigure(set.file+"-containers.png", "Containers spawned against Atoll — "+set.what, "% change (lower is fewer)", others,
					changeValue(ix, containers), set.traces),
				distFigure(set.file+"-live.png", "Mean live containers against Atoll — "+set.what, "% change (lower is fewer)", others,
					changeValue(ix, avgLive), set.traces))
		}
		figs = append(figs, distFigure(set.file+"-slo.png", "SLO misses — "+set.what, "% of requests over the SLO", policies,
			func(c cond, p string) (float64, bool) {
				v, ok := ix.mean(c, compliance, p)
				return 100 * (1 - v), ok
			}, set.traces))
	}
	return figs
}

// headlineFigure draws the headline: mean live containers over the
// oracle's, per policy, with the bound and oracle-predicted, per split.
func headlineFigure(ix index, policies []string) report.Figure {
	cats := append(slices.Clone(policies), "bound", "oracle-predicted")
	f := report.Figure{File: "summary-vs-oracle.png", Title: "Mean live containers over the oracle's", YLabel: "× the oracle's (lower is fewer)", Categories: cats}
	value := map[string]metric{
		"bound":            ratioOf(func(r report.Record) float64 { return r.Bound }),
		"oracle-predicted": ratioOf(func(r report.Record) float64 { return r.OraclePredicted }),
	}
	for _, sp := range []struct {
		name   string
		traces []string
	}{{"stable", stable}, {"Twitter 288", realTwit}, {"Twitter 6384", largeOnly}} {
		s := report.Series{Name: sp.name, Values: make([]float64, len(cats))}
		for i, p := range cats {
			m, ok := value[p]
			ref := p
			if ok && len(policies) > 0 {
				ref = policies[0]
			} else if !ok {
				m = ratioOf(func(r report.Record) float64 { return r.AvgContainers })
			}
			s.Values[i], _ = ix.mean(cond{apps: allApps, dists: allDists, traces: sp.traces}, m, ref)
		}
		f.Series = append(f.Series, s)
	}
	return f
}

// changeValue is a metric's change against Atoll, in percent.
func changeValue(ix index, m metric) func(cond, string) (float64, bool) {
	return func(c cond, p string) (float64, bool) {
		v, ok := ix.change(c, m, p, "atoll")
		return 100 * v, ok
	}
}

func distFigure(file, title, ylabel string, policies []string, value func(cond, string) (float64, bool), traces []string) report.Figure {
	f := report.Figure{File: file, Title: title, YLabel: ylabel, Categories: policies}
	for _, d := range PaperDists {
		s := report.Series{Name: d, Values: make([]float64, len(policies))}
		for i, p := range policies {
			// A missing cell draws no bar; the tables say n/a.
			s.Values[i], _ = value(cond{apps: allApps, dists: []string{d}, traces: traces}, p)
		}
		f.Series = append(f.Series, s)
	}
	return f
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

func withoutChainAblations(policies []string) []string {
	out := policies
	for _, name := range policy.ChainAblations() {
		if name != "cypress" {
			out = without(out, name)
		}
	}
	return out
}

// fig2Paper is what the paper reports for each figure-2 scheme.
var fig2Paper = map[string]string{
	"cypress-no-cp": "99.93%",
	"cypress-cp":    "99.95%; response -5%, tail -4% vs No CP",
	"cypress":       "99.98%; response -3%, tail -6% vs CP",
}

var fig2Label = map[string]string{"cypress-no-cp": "No CP", "cypress-cp": "CP", "cypress": "CP+LAS (cypress)"}

// chainAblationBody compares No CP, CP and CP+LAS on the figure-2 app over
// the stable traces and every distribution; each scheme's response and p99
// changes are against the scheme before it, as the paper states them.
func chainAblationBody(ix index, present []string) (string, bool) {
	schemes := policy.ChainAblations()
	for _, s := range schemes {
		if !slices.Contains(present, s) {
			return "", false
		}
	}
	c := cond{apps: []string{ChainAblationApp}, dists: allDists, traces: stable}
	var b strings.Builder
	fmt.Fprintf(&b, fig2Intro, ChainAblationApp)
	b.WriteString("| scheme | SLO compliance | mean response | vs previous | p99 | vs previous | spawned | mean live | paper (fig. 2) |\n|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for i, s := range schemes {
		slo, _ := ix.mean(c, compliance, s)
		resp, _ := ix.mean(c, response, s)
		p99, _ := ix.mean(c, p99Ms, s)
		spawned, _ := ix.mean(c, containers, s)
		live, _ := ix.mean(c, avgLive, s)
		respVs, p99Vs := "—", "—"
		if i > 0 {
			respVs = changeClaim(c, response, schemes[i-1])(ix, s)
			p99Vs = changeClaim(c, p99Ms, schemes[i-1])(ix, s)
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f ms | %s | %.0f ms | %s | %.0f | %.1f | %s |\n", fig2Label[s], report.Compliance(slo),
			resp, respVs, p99, p99Vs, spawned, live, fig2Paper[s])
	}
	return b.String(), true
}

func p99Ms(r report.Record) float64 { return r.P99Ms }

const fig2Intro = "The paper's figure 2 ablation on %s (speech-to-text → text-translate → send-message), averaged over the heavy, medial and light distributions under the Poisson and Wiki traces. No CP sizes the functions after the first by static batching on their mean execution time; CP carries the predicted input sizes down the chain (chained prediction) and IS-batches every function; CP+LAS adds the Look-Ahead Scaler. All three keep IS Batching, IS Reordering and the Reactive Scaler.\n\n"
