package orchbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/localcluster"
	"gantry.dev/gantry/pkg/rtcontroller"
	"gantry.dev/gantry/pkg/rtqueue"
)

// tinyOptions is the smallest run that still meets churn: two services,
// one short iteration of continuous churn at burst 5.
func tinyOptions(t *testing.T, kubeconfig string) Options {
	_, file, _, _ := runtime.Caller(0)
	o := DefaultOptions()
	o.Kubeconfig = kubeconfig
	o.CRDPath = filepath.Join(filepath.Dir(file), "..", "..", "config", "crd", "bases", "gantry.dev_rtresources.yaml")
	o.ConfigDir = filepath.Join(filepath.Dir(file), "..", "..", "config")
	o.Services, o.Repetitions, o.Iteration, o.Gap = 2, 1, 6*time.Second, time.Second
	o.Cases = []Case{{ModeContinuous, 5}}
	o.Controller = rtcontroller.AppConfig{
		Options:   rtcontroller.Options{QPS: 50, Burst: 100},
		QueueKind: rtcontroller.QueueRT, FIFOWorkers: rtcontroller.FIFOWorkers,
		Pool: rtqueue.DefaultPoolConfig(), Critical: rtqueue.PaperCriticalBand(),
	}
	if testing.Verbose() {
		o.Progress = os.Stderr
	}
	return o
}

// TestRunTinyAgainstTheLocalControlPlane runs vanilla and Gantry on the
// real control plane and checks the JSON's shape and that every stage of
// both controllers has samples.
func TestRunTinyAgainstTheLocalControlPlane(t *testing.T) {
	cluster := localcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, tinyOptions(t, cluster.KubeconfigPath()))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Interrupted {
		t.Fatal("run reports itself interrupted")
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs       []map[string]any `json:"runs"`
		Reductions []map[string]any `json:"reductions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2*int(numStages) || len(doc.Reductions) != int(numStages) {
		t.Fatalf("want %d runs and %d reductions, got %s", 2*numStages, numStages, raw)
	}
	for _, run := range doc.Runs {
		for _, k := range []string{"controller", "mode", "burst", "stage", "n", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "std_ms"} {
			if _, ok := run[k]; !ok {
				t.Errorf("run %v lacks %q", run, k)
			}
		}
		if n, _ := run["n"].(float64); n < 1 {
			t.Errorf("no samples: %v", run)
		}
	}
	for _, red := range doc.Reductions {
		if _, ok := red["median_reduction"].(float64); !ok {
			t.Errorf("reduction without a value: %v", red)
		}
	}
	// The controller ran as its service account and traced its scale-ups.
	parts := map[string]int{}
	for _, b := range rep.Breakdown {
		if b.Controller == Gantry {
			parts[b.Stage] = b.N
		}
	}
	for _, c := range []string{"queue", "mark_apiserver", "mark_to_watch", "create_apiserver", "create_to_watch"} {
		if parts[c] < 1 {
			t.Errorf("breakdown has no %s for gantry: %v", c, parts)
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	dir := t.TempDir()
	if err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
}
