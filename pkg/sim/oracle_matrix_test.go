package sim

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// The oracle's test matrix (issue 20, item 4): every app, under Poisson,
// Wiki, Twitter, an Azure Functions-format trace with minute-long spikes,
// and hand-built step and ramp traces, with several seeds. `go test` runs
// six of its runs (seed 1: a single-function app under the Azure-format
// spikes and under the ramp, chains under the step and Twitter; a chain
// under Wiki with seed 2 and a single function under Poisson with seed
// 3, so that every app, trace and seed is run; two under -short), within
// the CI budget under -race; -oracle-full runs all of seeds 1-3 (90
// runs):
//
//	go test -run TestOracleMeetsEverySLO ./pkg/sim -oracle-full
//
// testdata/oracle-before.csv holds what the oracle held on every cell
// before it followed its plan (recorded with -oracle-record from commit
// c63ec4c), so that the test can check it never holds more.
var (
	oracleFull   = flag.Bool("oracle-full", false, "run the oracle's whole test matrix (seeds 1-3)")
	oracleRecord = flag.String("oracle-record", "", "write the oracle's figures on the test matrix to this CSV file")
)

const oracleBaseline = "testdata/oracle-before.csv"

// oracleCell is one run of the matrix.
type oracleCell struct {
	app, dist, trace string
	seed             uint64
}

func (c oracleCell) key() string {
	return fmt.Sprintf("%s/%s/%s/%d", c.app, c.dist, c.trace, c.seed)
}

// Every cell runs 3 simulated minutes at a mean of 100 requests/s on 12
// nodes (576 cores), room for the peaks of every trace.
const (
	oracleMatrixRate     = 100.0
	oracleMatrixDuration = 3 * time.Minute
	oracleMatrixNodes    = 12
)

var oracleMatrixTraces = []string{"poisson", "wiki", "twitter", "azure-spikes", "step", "ramp"}

func oracleMatrix(full bool) []oracleCell {
	seeds := []uint64{1}
	if full {
		seeds = []uint64{1, 2, 3}
	}
	dists := []string{"heavy", "medial", "light"}
	var out []oracleCell
	for _, seed := range seeds {
		for i, app := range workload.Names() {
			for j, tr := range oracleMatrixTraces {
				out = append(out, oracleCell{app: app, dist: dists[(i+j+int(seed))%len(dists)], trace: tr, seed: seed})
			}
		}
	}
	return out
}

func (c oracleCell) config(t testing.TB) Config {
	t.Helper()
	return Config{App: paperApp(t, c.app), Dist: dist(t, c.dist), Trace: oracleMatrixTrace(t, c.trace, c.seed),
		Policy: "oracle", Seed: c.seed, Nodes: oracleMatrixNodes}
}

// oracleMatrixTrace builds a trace of the matrix with a mean of
// oracleMatrixRate requests/s.
func oracleMatrixTrace(t testing.TB, name string, seed uint64) trace.Trace {
	t.Helper()
	n := int(oracleMatrixDuration / time.Second)
	per := make([]float64, n)
	switch name {
	case "azure-spikes":
		return azureSpikes(t, seed)
	case "step":
		// 30 s at a fifth of the rate, 30 s at twice it, and so on: every
		// step up is a burst no predictor sees coming.
		for i := range per {
			per[i] = 0.2
			if (i/30)%2 == 1 {
				per[i] = 2
			}
		}
	case "ramp":
		for i := range per {
			per[i] = 0.1 + 1.9*float64(i)/float64(n-1)
		}
	default:
		tr, err := trace.Generate(name, oracleMatrixRate, oracleMatrixDuration, seed)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	tr := trace.Trace{Name: name, PerSecond: per}
	return tr.Scale(oracleMatrixRate / tr.Mean())
}

// azureSpikes is an Azure Functions 2019 row (the format --trace-file
// reads): a slow diurnal base with minute-long spikes of three times the
// base, read with trace.ReadAzure and cut to the matrix's duration.
func azureSpikes(t testing.TB, seed uint64) trace.Trace {
	t.Helper()
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
		t.Fatal(err)
	}
	tr = tr.Truncate(oracleMatrixDuration)
	return tr.Scale(oracleMatrixRate / tr.Mean())
}

// oracleFigures is what one run of the oracle held and met.
type oracleFigures struct {
	live, slo float64
}

// runOracle runs the oracle on cfg and checks that every request it
// misses is one that no policy can meet: its execution times alone add up
// to more than the SLO. It returns the run's figures.
func runOracle(t testing.TB, name string, cfg Config) oracleFigures {
	t.Helper()
	missed := map[int64]bool{}
	cfg.OnComplete = func(id int64, resp time.Duration) {
		if resp > cfg.App.SLO {
			missed[id] = true
		}
	}
	res, err := Run(cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.Rejected > 0 {
		t.Errorf("%s: %d requests rejected", name, res.Rejected)
	}
	cfg.applyDefaults()
	infeasible := 0
	err = realize(t.Context(), &cfg, func(id, _ int64, exec []int64) {
		var sum int64
		for _, p := range exec {
			sum += p
		}
		if sum > int64(cfg.App.SLO) {
			infeasible++
			if !missed[id] {
				t.Errorf("%s: request %d runs %v, longer than the SLO, yet met it", name, id, time.Duration(sum))
			}
			delete(missed, id)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range missed {
		t.Errorf("%s: the oracle missed request %d, which could meet its SLO", name, id)
	}
	if want := 1 - float64(infeasible)/float64(res.Requests); math.Abs(res.SLOCompliance-want) > 1e-12 {
		t.Errorf("%s: SLO compliance %.6f, want %.6f (%d infeasible requests)", name, res.SLOCompliance, want, infeasible)
	}
	return oracleFigures{live: res.AvgContainers, slo: res.SLOCompliance}
}

func readOracleBaseline(t testing.TB, path string) map[string]oracleFigures {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]oracleFigures{}
	for _, r := range rows[1:] {
		live, err1 := strconv.ParseFloat(r[1], 64)
		slo, err2 := strconv.ParseFloat(r[2], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: bad row %v", path, r)
		}
		out[r[0]] = oracleFigures{live: live, slo: slo}
	}
	return out
}

func writeOracleBaseline(t testing.TB, path string, keys []string, figs map[string]oracleFigures) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"cell", "avg_containers", "slo_compliance"})
	for _, k := range keys {
		_ = w.Write([]string{k, strconv.FormatFloat(figs[k].live, 'g', -1, 64), strconv.FormatFloat(figs[k].slo, 'g', -1, 64)})
	}
	w.Flush()
	if err := errors.Join(w.Error(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestOracleMeetsEverySLO runs the oracle on the test matrix: it meets
// the SLO of every request on every cell that any policy can meet (one
// whose execution times alone exceed the SLO cannot be), and never holds
// more mean live containers than the oracle did before it followed its
// plan.
func TestOracleMeetsEverySLO(t *testing.T) {
	full := *oracleFull || *oracleRecord != ""
	cells := oracleMatrix(true)
	if !full {
		// Every app and every trace at least once, and each seed, within
		// the CI budget (about 7 s a cell under -race on a loaded machine).
		picked := []string{"audio-translation step 1", "image-compression azure-spikes 1", "document-summary twitter 1", "sentiment-analysis ramp 1",
			"email-categorization wiki 2", "image-compression poisson 3"}
		if testing.Short() {
			picked = picked[:2]
		}
		var some []oracleCell
		for _, c := range cells {
			if slices.Contains(picked, fmt.Sprintf("%s %s %d", c.app, c.trace, c.seed)) {
				some = append(some, c)
			}
		}
		cells = some
	}
	got := map[string]oracleFigures{}
	var keys []string
	for _, c := range cells {
		keys = append(keys, c.key())
		if *oracleRecord != "" {
			res, err := Run(c.config(t))
			if err != nil {
				t.Fatal(err)
			}
			got[c.key()] = oracleFigures{live: res.AvgContainers, slo: res.SLOCompliance}
			continue
		}
		got[c.key()] = runOracle(t, c.key(), c.config(t))
	}
	if *oracleRecord != "" {
		writeOracleBaseline(t, *oracleRecord, keys, got)
		return
	}
	before := readOracleBaseline(t, oracleBaseline)
	var sumNow, sumBefore float64
	for _, k := range keys {
		g, b := got[k], before[k]
		if b.live == 0 {
			t.Fatalf("%s: no figure in %s", k, oracleBaseline)
		}
		if g.live > b.live {
			t.Errorf("%s: %.4f mean live containers, more than the %.4f before", k, g.live, b.live)
		}
		sumNow += g.live / b.live
		sumBefore++
	}
	t.Logf("%d cells: mean live containers %.4f of before", len(keys), sumNow/sumBefore)
}
