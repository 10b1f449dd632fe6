package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// updateGolden re-records testdata/golden-matrix.json:
//
//	go test -run TestSmallMatrixResultsAreUnchanged -update ./pkg/experiment
var updateGolden = flag.Bool("update", false, "re-record the golden matrix results")

// goldenPolicies are the policies whose results only the simulator, the
// bound and the oracle's planner decide: gantry and oracle-predicted are
// left out because their rules are still being tuned (issue 20), and a
// change of policy is not what this test guards.
var goldenPolicies = []string{"atoll", "commercial", "cypress", "knative", "oracle"}

// TestSmallMatrixResultsAreUnchanged runs a small fixed matrix (two apps,
// one of them a chain, every trace of the paper matrix, the large scale
// included, with the yardsticks) and compares every figure of every run,
// to the last digit, with the recorded ones: speeding up the simulator,
// the bound or the oracle must not move any result. A change that is
// meant to move them re-records the file with -update and says why.
func TestSmallMatrixResultsAreUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a small matrix")
	}
	jobs := goldenJobs(t)
	records, err := Run(context.Background(), jobs, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range records {
		r := &records[i]
		// Wall time is the machine's; oracle-predicted is a policy; the
		// latency CDF is summarised by the percentiles, which are kept.
		r.WallS, r.OraclePredicted, r.OraclePredictedSLO, r.LatencyCDF = 0, 0, 0, nil
	}
	got, err := json.MarshalIndent(records, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "golden-matrix.json")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	var before []json.RawMessage
	if err := json.Unmarshal(want, &before); err != nil || len(before) != len(records) {
		t.Fatalf("%s holds %d runs, the matrix %d (%v); re-record with -update if the change is meant", path, len(before), len(records), err)
	}
	for i, r := range records {
		line, _ := json.MarshalIndent(r, "", " ")
		var old bytes.Buffer
		_ = json.Indent(&old, before[i], "", " ")
		if !bytes.Equal(line, old.Bytes()) {
			t.Errorf("%s/%s/%s/%s changed:\n got %s\nwant %s", r.App, r.Dist, r.Trace, r.Policy, line, old.Bytes())
		}
	}
	t.Log("re-record with -update only if the change is meant to move results")
}

// goldenJobs is the small matrix: image-compression (one function) and
// audio-translation (a chain of two), heavy inputs, under the paper's
// Poisson, Wiki and Twitter traces for 10 s and the large-scale Twitter
// trace for 3 s, seed 1.
func goldenJobs(t *testing.T) []Job {
	t.Helper()
	p := PaperPlan{Duration: 10 * time.Second, LargeDuration: 3 * time.Second, Seed: 1, Policies: goldenPolicies}
	traces, err := paperTraces(p)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for _, st := range traces {
		for _, app := range []string{"image-compression", "audio-translation"} {
			more, err := conditionJobs(p, app, "heavy", st)
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, more...)
		}
	}
	return jobs
}
