package experiment

import (
	"context"
	"encoding/csv"
	"flag"
	"math"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// The oracle on the paper matrix (seed 1, 60 runs, 20 million requests:
// about a minute and a half of CPU, so not in `go test`'s default run):
//
//	go test -run TestOracleMeetsEverySLOOnThePaperMatrix ./pkg/experiment -oracle-paper
//
// testdata/oracle-before-paper.csv is the oracle's results.csv rows
// before it followed its plan (`gantry sim --experiment paper --policies
// oracle` at commit c63ec4c).
var oraclePaper = flag.Bool("oracle-paper", false, "run the oracle on the whole paper matrix")

func TestOracleMeetsEverySLOOnThePaperMatrix(t *testing.T) {
	if !*oraclePaper {
		t.Skip("the whole paper matrix: run with -oracle-paper")
	}
	plan := DefaultPaperPlan()
	plan.Policies, plan.ChainAblation = []string{"oracle"}, false
	jobs, err := PaperJobs(plan)
	if err != nil {
		t.Fatal(err)
	}
	records, err := Run(context.Background(), jobs, Options{Workers: runtime.GOMAXPROCS(0)})
	if err != nil {
		t.Fatal(err)
	}
	before := readPaperBaseline(t, "testdata/oracle-before-paper.csv")
	var ratio float64
	for _, r := range records {
		k := r.App + "/" + r.Dist + "/" + r.Trace
		b, ok := before[k]
		if !ok {
			t.Fatalf("%s: no figure before", k)
		}
		// Every miss is a request no policy can meet.
		if missed := float64(r.Requests) * (1 - r.SLOCompliance); math.Abs(missed-float64(r.Infeasible)) > 1e-6*float64(r.Requests) || r.Rejected > 0 {
			t.Errorf("%s: %.0f missed, %d rejected; only the %d infeasible may miss", k, missed, r.Rejected, r.Infeasible)
		}
		if r.AvgContainers > b {
			t.Errorf("%s: %.4f mean live containers, more than the %.4f before", k, r.AvgContainers, b)
		}
		ratio += r.AvgContainers / b / float64(len(records))
	}
	t.Logf("%d runs: mean live containers %.4f of before", len(records), ratio)
}

func readPaperBaseline(t *testing.T, path string) map[string]float64 {
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
	out := map[string]float64{}
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[r[0]+"/"+r[1]+"/"+r[2]] = v
	}
	return out
}
