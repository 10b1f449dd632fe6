package experiment

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// gantryGoldenFile holds gantry's results on goldenGantryRuns, recorded
// with -update-gantry (after a change to gantry's rules, which moves
// them on purpose):
//
//	go test ./pkg/experiment -run TestGantryResultsAreUnchanged -update-gantry
const gantryGoldenFile = "golden-gantry.json"

// updateGantry re-records gantryGoldenFile only: -update re-records the
// simulator's golden matrix, which a policy change must not move.
var updateGantry = flag.Bool("update-gantry", false, "re-record gantry's golden results (testdata/golden-gantry.json)")

// gantryGolden is one run's figures and a digest of every request's
// response time, in completion order.
type gantryGolden struct {
	Run    string     `json:"run"`
	Result sim.Result `json:"result"`
	Digest string     `json:"digest"`
}

// TestGantryResultsAreUnchanged runs gantry on a small matrix long enough
// for its rules to act (windows, idle-age retirement, burst alarms, full
// queues at the large scale, the Azure-format spikes) and compares every
// figure, and every request's response time, with the recorded ones: a
// change to the simulator or to the policy's code that is meant to be
// faster, not different, must not move any of them. A change to gantry's
// rules moves them by design: it re-records the file and
// says so (-update-gantry: the helpers tuning the rules, and the
// integrator after merging them).
func TestGantryResultsAreUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gantry on a small matrix")
	}
	var got []gantryGolden
	for _, c := range goldenGantryRuns(t) {
		h := fnv.New64a()
		var buf [16]byte
		c.cfg.OnComplete = func(id int64, resp time.Duration) {
			binary.LittleEndian.PutUint64(buf[:8], uint64(id))
			binary.LittleEndian.PutUint64(buf[8:], uint64(resp))
			h.Write(buf[:])
		}
		res, err := sim.Run(c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		res.WallSeconds, res.LatencyCDF = 0, nil
		got = append(got, gantryGolden{Run: c.name, Result: res, Digest: fmt.Sprintf("%016x", h.Sum64())})
	}
	out, err := json.MarshalIndent(got, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	path := filepath.Join("testdata", gantryGoldenFile)
	if *updateGantry {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(out, want) {
		return
	}
	var before []gantryGolden
	if err := json.Unmarshal(want, &before); err != nil || len(before) != len(got) {
		t.Fatalf("%s holds %d runs, the matrix %d (%v); re-record with -update-gantry if the change is meant", path, len(before), len(got), err)
	}
	for i := range got {
		a, _ := json.Marshal(got[i])
		b, _ := json.Marshal(before[i])
		if !bytes.Equal(a, b) {
			t.Errorf("%s changed:\n got %s\nwant %s", got[i].Run, a, b)
		}
	}
	t.Log("re-record with -update-gantry only if the change is meant to move gantry's results (a change to its rules)")
}

type goldenGantryRun struct {
	name string
	cfg  sim.Config
}

// goldenGantryRuns is image-compression and the audio-translation chain,
// heavy inputs, seed 1, under the matrix's Poisson, Wiki and Twitter
// traces at 288 cores for 60 s, Twitter at 6384 cores for 6 s, and the
// Azure-format spikes for 3 minutes (a spike and a half).
func goldenGantryRuns(t *testing.T) []goldenGantryRun {
	t.Helper()
	p := PaperPlan{Duration: time.Minute, LargeDuration: 6 * time.Second, Seed: 1}
	traces, err := paperTraces(p)
	if err != nil {
		t.Fatal(err)
	}
	spikes, err := AzureSpikes(AzureSpikesRate, 3*time.Minute, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	traces = append(traces, scaledTrace{trace: spikes, label: AzureSpikesLabel, scale: ScaleReal, nodes: AzureSpikesNodes})
	dist, err := workload.LookupDist("heavy")
	if err != nil {
		t.Fatal(err)
	}
	var runs []goldenGantryRun
	for _, st := range traces {
		for _, name := range []string{"image-compression", "audio-translation"} {
			app, err := workload.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, goldenGantryRun{name: name + "/heavy/" + st.label, cfg: goldenGantryConfig(app, dist, st.trace, st.nodes)})
		}
	}
	return runs
}

func goldenGantryConfig(app workload.App, dist workload.Distribution, tr trace.Trace, nodes int) sim.Config {
	return sim.Config{
		App: app, Dist: dist, Trace: tr, Seed: 1, Policy: "gantry",
		Nodes: nodes, CoresPerNode: CoresPerNode, ColdStart: PaperColdStart,
		Tick: PaperTick, Window: PaperWindow, IdleTimeout: PaperIdleTimeout,
	}
}
