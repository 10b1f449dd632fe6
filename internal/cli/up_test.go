package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/liverun"
)

// gantry up runs each policy behind a gateway process of its own and drives
// all of them with the same arrivals: the same requests reach every policy,
// and the report has the conventions' JSON shape, the plots and a verdict.
func TestUpComparesPoliciesSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two gateway processes and their instances")
	}
	t.Setenv(cliChildEnv, "1")
	out := t.TempDir()
	root := newRootCmd()
	var stdout bytes.Buffer
	root.SetOut(&stdout)
	root.SetArgs([]string{"up", "--policy", "gantry,cypress", "--app", "sentiment-analysis", "--trace", "poisson",
		"--rate", "4", "--duration", "4s", "--warmup", "2s", "--start-delay", "0s", "--out", out, "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		App       string  `json:"app"`
		Trace     string  `json:"trace"`
		Rate      float64 `json:"rate"`
		DurationS float64 `json:"duration_s"`
		Seed      uint64  `json:"seed"`
		Runs      []struct {
			Policy        string  `json:"policy"`
			Requests      int64   `json:"requests"`
			Errors        int64   `json:"errors"`
			SLOMs         float64 `json:"slo_ms"`
			SLOCompliance float64 `json:"slo_compliance"`
			AvgContainers float64 `json:"avg_containers"`
			P99Ms         float64 `json:"p99_ms"`
		} `json:"runs"`
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if rep.App != "sentiment-analysis" || rep.Trace != "poisson" || rep.Rate != 4 || rep.DurationS != 4 || rep.Seed != 1 {
		t.Errorf("header = %+v", rep)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Policy != "gantry" || rep.Runs[1].Policy != "cypress" {
		t.Fatalf("runs = %+v", rep.Runs)
	}
	for _, r := range rep.Runs {
		if r.Requests == 0 || r.Requests != rep.Runs[0].Requests {
			t.Errorf("%s got %d requests, gantry %d: every policy must get the same arrivals", r.Policy, r.Requests, rep.Runs[0].Requests)
		}
		if r.SLOMs <= 0 || r.AvgContainers <= 0 || r.P99Ms <= 0 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
	}
	if rep.Verdict == "" {
		t.Error("no verdict")
	}
	for _, f := range []string{liverun.UpReportFile, liverun.UpJSONFile, liverun.UpInstancesPlot, liverun.UpLatencyPlot} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, liverun.UpReportFile))
	if !strings.Contains(string(md), "| gantry |") || !strings.Contains(string(md), "**Verdict:**") {
		t.Errorf("report.md:\n%s", md)
	}
}

// The progress line keeps a number and its unit together, and shows the
// p99, SLO compliance and errors.
func TestUpProgressText(t *testing.T) {
	line := progressText(liverun.ArmProgress{Name: "gantry", Phase: "measure", Elapsed: 20 * time.Second,
		Total: 90 * time.Second, Done: 150, Live: 7, P99: 812345 * time.Microsecond, SLOCompliance: 0.9987, Errors: 2})
	for _, want := range []string{"20s/90s", "done    150", "live    7", "p99   812ms", "SLO  99.87%", "errors 2"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	if empty := progressText(liverun.ArmProgress{Name: "atoll", Phase: "warmup"}); !strings.Contains(empty, "p99       –") {
		t.Errorf("before any answer: %q", empty)
	}
}

func TestUpUsageErrors(t *testing.T) {
	assertUsageErrors(t, []string{"up"}, [][]string{
		{"--policy", ""},
		{"--policy", "gantry,gantry"},
		{"--policy", "oracle"},
		{"--functions", "fake"},
		{"--scenario", "nope"},
		{"--scenario", "criticality", "--policy", "gantry,cypress"},
		{"--idle-timeout", "1ms"},
	})
}
