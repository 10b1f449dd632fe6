package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/report"
)

func TestSimJSONPrintsExactlyOneObjectAndWritesTheReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator")
	}
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, _, err := gantry(t, "sim", "--app", "sentiment-analysis", "--dist", "light",
		"--trace", "wiki", "--rate", "20", "--duration", "30s", "--policies", "atoll,cypress", "--json", "--out", out)
	if err != nil {
		t.Fatalf("%v\nstderr: %s", err, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	var got struct{ Runs []map[string]any }
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Errorf("stdout has more than one JSON value:\n%s", stdout)
	}
	if len(got.Runs) != 2 || got.Runs[0]["policy"] != "atoll" || got.Runs[1]["policy"] != "cypress" {
		t.Fatalf("runs = %v", got.Runs)
	}
	for _, r := range got.Runs {
		if r["app"] != "sentiment-analysis" || r["dist"] != "light" || r["trace"] != "wiki" {
			t.Errorf("labels: %v", r)
		}
		if c, ok := r["slo_compliance"].(float64); !ok || c < 0 || c > 1 {
			t.Errorf("slo_compliance %v is not a fraction", r["slo_compliance"])
		}
		if n, ok := r["requests"].(float64); !ok || n < 300 {
			t.Errorf("requests %v, want about 600", r["requests"])
		}
	}
	for _, f := range []string{report.CSVFile, report.JSONFile, report.MarkdownFile,
		"plots/sentiment-analysis_light_wiki-containers.png", "plots/sentiment-analysis_light_wiki-latency-cdf.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	// stderr here is a buffer, not a terminal: no progress bar in it.
	if strings.Contains(stderr, "100%") || strings.Contains(stderr, "simulating") {
		t.Errorf("a progress bar on a stderr that is no terminal: %q", stderr)
	}
}

func TestSimSameSeedSameResults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator")
	}
	args := []string{"sim", "--app", "audio-translation", "--trace", "twitter", "--rate", "15",
		"--duration", "20s", "--policies", "cypress,kraken", "--json", "--seed", "7"}
	a, _, _, err := gantry(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, _ := gantry(t, args...)
	strip := func(s string) string { // wall time is the only field allowed to differ
		var v struct{ Runs []map[string]any }
		_ = json.Unmarshal([]byte(s), &v)
		for _, r := range v.Runs {
			delete(r, "wall_s")
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	if strip(a) != strip(b) {
		t.Errorf("same seed, different results:\n%s\n%s", a, b)
	}
}

func TestSimReplaysATraceFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator")
	}
	path := filepath.Join(t.TempDir(), "load.csv")
	if err := os.WriteFile(path, []byte("count\n10\n10\n10\n10\n10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, _, err := gantry(t, "sim", "--trace-file", path, "--policies", "atoll", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Runs []map[string]any }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Runs) != 1 || got.Runs[0]["trace"] != "load" {
		t.Fatalf("got %s (%v)", stdout, err)
	}
	if n := got.Runs[0]["requests"].(float64); n < 25 || n > 80 {
		t.Errorf("requests %v, want about 50 from the file", n)
	}
}

func TestSimPaperExperimentWritesTheComparison(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the paper matrix at a tiny duration")
	}
	out := filepath.Join(t.TempDir(), "paper")
	stdout, stderr, _, err := gantry(t, "sim", "--experiment", "paper", "--duration", "3s", "--large-duration", "2s",
		"--policies", "atoll,cypress", "--out", out, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got struct{ Runs []map[string]any }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	// The matrix, plus No CP and CP (figure 2) on audio-translation under
	// 3 distributions x the 2 stable traces.
	if want := 5*3*4*2 + 2*3*2; len(got.Runs) != want {
		t.Errorf("%d runs, want %d", len(got.Runs), want)
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Beside the paper's published figures", "| Fig. 11a |", "twitter-large", "## SLO compliance per policy",
		"## Chained prediction (figure 2)"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}
