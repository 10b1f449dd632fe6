package coldstartbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// cache is where the tests build the subjects, once for all of them.
var cache string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coldstartbench-")
	if err != nil {
		panic(err)
	}
	cache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// A tiny run through the real gateway: the floor server and one example
// function run by the slim runtime, both modes, two cold starts each. The
// JSON has one row per subject and mode, every cold start answered, the
// floor's ratio 1.
func TestTinyRunReportsEverySubjectInBothModes(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("needs the go tool to build the subjects: %v", err)
	}
	wd, _ := os.Getwd()
	o := DefaultOptions()
	o.Functions, o.Runs, o.Cache, o.Module = []string{"sentiment"}, 2, cache, ModuleRoot(wd)
	if o.Module == "" {
		t.Fatalf("no module root above %s", wd)
	}
	var progress bytes.Buffer
	o.Progress = &progress
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Runs        int              `json:"runs"`
		Rows        []map[string]any `json:"rows"`
		Load        *float64         `json:"load_avg_1m"`
		Interrupted *bool            `json:"interrupted"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Runs != 2 || got.Load == nil || got.Interrupted == nil || *got.Interrupted || len(got.Rows) != 4 {
		t.Fatalf("report %s", b)
	}
	var seen []string
	for _, r := range got.Rows {
		for _, k := range []string{"runtime", "function", "mode", "samples", "errors", "p50_ms", "p99_ms", "max_ms", "ready_p50_ms", "warm_p50_ms", "floor_ratio"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v lacks %q", r, k)
			}
		}
		if r["samples"] != 2.0 || r["errors"] != 0.0 || r["p50_ms"].(float64) <= 0 || r["p99_ms"].(float64) < r["p50_ms"].(float64) || r["warm_p50_ms"].(float64) <= 0 {
			t.Errorf("row %v: want 2 samples, no error, 0 < p50 <= p99, a warm figure", r)
		}
		if r["runtime"] == RuntimeFloor && r["floor_ratio"] != 1.0 {
			t.Errorf("floor row %v: ratio must be 1", r)
		}
		seen = append(seen, r["runtime"].(string)+"/"+r["mode"].(string))
	}
	slices.Sort(seen)
	if want := []string{"gantry-fn/poll", "gantry-fn/socket", "go-floor/poll", "go-floor/socket"}; !slices.Equal(seen, want) {
		t.Errorf("rows %v, want %v", seen, want)
	}
	if !strings.Contains(progress.String(), "round 2 of 2") {
		t.Errorf("progress %q", progress.String())
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "p50 / floor") {
		t.Errorf("table %q %v", table.String(), err)
	}
}

// A cancelled run stops at once and says it was interrupted.
func TestCancelledRunIsMarkedInterrupted(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("needs the go tool: %v", err)
	}
	o := DefaultOptions()
	o.Functions, o.Runs, o.Cache = nil, 1000, cache
	ctx, cancel := context.WithCancel(t.Context())
	o.Progress = cancelAfterFirst{cancel}
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.Rows[0].Samples >= 1000 {
		t.Fatalf("report %+v", rep)
	}
}

// cancelAfterFirst cancels the run when it reports its first round.
type cancelAfterFirst struct{ cancel context.CancelFunc }

func (c cancelAfterFirst) Write(b []byte) (int, error) { c.cancel(); return len(b), nil }
