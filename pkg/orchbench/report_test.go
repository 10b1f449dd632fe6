package orchbench

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeReport has vanilla ten times slower than Gantry in every stage.
func fakeReport(t *testing.T) *Report {
	t.Helper()
	opts := DefaultOptions().Quick()
	rng := rand.New(rand.NewPCG(1, 2))
	var samples []Sample
	for _, c := range opts.Cases {
		for _, ctl := range opts.Controllers {
			scale := 10.0
			if ctl == Vanilla {
				scale = 100
			}
			for i := range 50 {
				for st := range numStages {
					samples = append(samples, Sample{Controller: ctl, Mode: c.Mode, Burst: c.Burst, Service: i%10 + 1,
						Stage: st, Ms: scale * float64(st+1) * (0.5 + rng.Float64())})
				}
			}
		}
	}
	return newReport(opts, samples, map[missKey]int{{Gantry, opts.Cases[0], PodsReady}: 2})
}

func TestReportJSONShapeAndReductions(t *testing.T) {
	rep := fakeReport(t)
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Controller, Mode, Stage string
			Burst, N, Missed        int
			P50                     float64 `json:"p50_ms"`
		}
		Reductions []struct {
			Mode, Stage string
			Burst       int
			Reduction   *float64 `json:"median_reduction"`
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2*2*int(numStages) || len(doc.Reductions) != 2*int(numStages) {
		t.Fatalf("got %d runs, %d reductions", len(doc.Runs), len(doc.Reductions))
	}
	for _, run := range doc.Runs {
		if run.N != 50 || run.P50 <= 0 {
			t.Errorf("run %+v", run)
		}
	}
	// Runs go case by case, controller by controller, stage by stage:
	// the second run's last stage is Gantry's pods running and ready.
	missed := 0
	for _, run := range doc.Runs {
		missed += run.Missed
	}
	if r := doc.Runs[2*int(numStages)-1]; missed != 2 || r.Missed != 2 || r.Controller != Gantry || r.Stage != PodsReady.String() {
		t.Errorf("missed: %d in all, last run of the first case %+v", missed, r)
	}
	for _, d := range doc.Reductions {
		// Same random draws for both controllers, scaled by 10 and 100.
		if d.Reduction == nil || *d.Reduction < 0.85 || *d.Reduction > 0.95 {
			t.Errorf("reduction %+v: want about 0.9", d)
		}
	}
}

func TestWriteDir(t *testing.T) {
	rep := fakeReport(t)
	rep.Warnings = []string{"continuous/20: the arms met unequal interference"}
	rep.ControllerManager = []ControllerManagerStats{{Controller: Vanilla, Mode: ModeInterval, Burst: 20,
		Queues: []QueueStats{{Name: "deployment", Items: 258, QueueMeanMs: 232, QueueOver100ms: 117, WorkMeanMs: 188}}, Requests: 601}}
	dir := t.TempDir()
	if err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"samples.csv", "summary.csv", "reductions.csv", "report.json", "report.md",
		"box-continuous-starts_processing.png", "cdf-interval-20-pods_created.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "samples.csv"))
	if lines := strings.Count(string(raw), "\n"); lines != 1+len(rep.Samples) {
		t.Errorf("samples.csv has %d lines, want %d", lines, 1+len(rep.Samples))
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"94.4%", "88.9%", "| gantry | continuous | 20 | starts_processing | 50 |", "by criticality",
		"**Warning: continuous/20: the arms met unequal interference.**", "| vanilla | interval | 20 | deployment | 258 | 232 | 117 | 188 |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

// An arm and case without a single scale-up (all of a Knative case's
// triggers missed) still gets its plots: a logarithmic axis without
// samples used to panic.
func TestPlotsOfACaseWithoutSamples(t *testing.T) {
	rep := newReport(Options{Controllers: []string{Vanilla, Gantry}, Cases: []Case{{ModeContinuous, 30}}}, nil, map[missKey]int{})
	files, err := rep.writePlots(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no plot written")
	}
}
