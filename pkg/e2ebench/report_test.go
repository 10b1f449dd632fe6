package e2ebench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func testReport() *Report {
	o := DefaultOptions()
	o.Program = "/bin/true"
	return &Report{Options: o,
		Runs: []Row{
			{Orchestrator: Vanilla, Mode: "continuous", Burst: 20, Requests: 100, P50Ms: 100, P95Ms: 400, P99Ms: 900, SLOCompliance: 0.9, ChurnObjects: 500},
			{Orchestrator: Gantry, Mode: "continuous", Burst: 20, Requests: 100, P50Ms: 80, P95Ms: 200, P99Ms: 300, SLOCompliance: 0.95, ChurnObjects: 400},
		},
		Samples: []Sample{
			{Orchestrator: Vanilla, OffsetS: 0.1, LatencyMs: 70, Measured: true, Status: 200, Kind: "ok"},
			{Orchestrator: Vanilla, OffsetS: 0.2, LatencyMs: 900, Measured: true, Status: 200, Kind: "ok"},
			{Orchestrator: Gantry, OffsetS: 0.1, LatencyMs: 0, Measured: true, Status: 200, Kind: "ok"},
			{Orchestrator: Gantry, OffsetS: 0.3, Kind: "client_overload"},
		}}
}

// --json prints exactly {"runs":[...]} with exactly the keys.
func TestReportJSONShape(t *testing.T) {
	b, err := json.Marshal(testReport())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string][]map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(got) != 1 || len(got["runs"]) != 2 {
		t.Fatalf("want one key runs with two rows: %s", b)
	}
	want := []string{"burst", "errors", "mode", "orchestrator", "p50_ms", "p95_ms", "p99_ms", "requests", "slo_compliance"}
	for _, row := range got["runs"] {
		var keys []string
		for k := range row {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("keys %v, want %v", keys, want)
		}
	}
	if got["runs"][0]["orchestrator"] != Vanilla || got["runs"][1]["orchestrator"] != Gantry {
		t.Errorf("orchestrators: %s", b)
	}
}

func TestReduction(t *testing.T) {
	if r := Reduction(PaperVanillaP50, PaperGantryP50); math.Round(100*r) != 81 {
		t.Errorf("paper p50 reduction %v, want 81%%", r)
	}
	if r := Reduction(PaperVanillaP95, PaperGantryP95); math.Round(100*r) != 28 {
		t.Errorf("paper p95 reduction %v, want 28%%", r)
	}
	if !math.IsNaN(Reduction(0, 1)) {
		t.Error("a zero baseline should give NaN")
	}
}

func TestWriteTableAndDir(t *testing.T) {
	r := testReport()
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vanilla", "gantry", "p50 20% lower, p95 50% lower", "p50 81%, p95 28% lower"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	dir := t.TempDir()
	if err := r.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "samples.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(csv), "\n"); n != 1+len(r.Samples) {
		t.Errorf("samples.csv has %d lines, want %d", n, 1+len(r.Samples))
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"761.45", "145.21", "7913.29", "5716.75", "| this run | 100.0 | 80.0 | 20% |", "latency.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "latency.png")); err != nil || st.Size() == 0 {
		t.Errorf("latency.png: %v", err)
	}
}

func TestValidate(t *testing.T) {
	ok := DefaultOptions()
	ok.Program = "/bin/true"
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if err := ok.Quick().Validate(); err != nil {
		t.Fatalf("quick: %v", err)
	}
	bad := []func(*Options){
		func(o *Options) { o.Program = "" },
		func(o *Options) { o.Command = "" },
		func(o *Options) { o.Rate = 0 },
		func(o *Options) { o.Rate = math.Inf(1) },
		func(o *Options) { o.Rate = math.NaN() },
		func(o *Options) { o.Duration = 0 },
		func(o *Options) { o.Duration = time.Hour },
		func(o *Options) { o.Burst = 0 },
		func(o *Options) { o.Mode = "x" },
		func(o *Options) { o.MaxScale = 1 },
		func(o *Options) { o.Size = math.NaN() },
		func(o *Options) { o.SLO = 0 },
		func(o *Options) { o.Orchestrators = nil },
		func(o *Options) { o.Orchestrators = []string{"knative"} },
	}
	for i, f := range bad {
		o := ok
		f(&o)
		if o.Validate() == nil {
			t.Errorf("case %d: %+v validated", i, o)
		}
	}
}
