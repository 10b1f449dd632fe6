package functions

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/workload"
)

// With a fixed seed, replay sleeps for exactly the model's sampled
// execution time and reports the model's sampled output size: the same
// draws the simulator's Function.Exec and Function.Output make.
func TestReplayFollowsTheModel(t *testing.T) {
	app, _ := workload.Lookup("audio-translation")
	f := app.Chain[0]
	const seed, size = 7, 200.0
	h := mustHandler(t, "replay", WithReplay(app.Name, f.Name, seed))
	rng := newRand(seed)
	for range 3 {
		wantExec, wantOut := f.Exec(size, rng), f.Output(size, rng)
		start := time.Now()
		rec, out := postOK(t, h, nil, http.Header{HeaderInputSize: {strconv.FormatFloat(size, 'g', -1, 64)}})
		if elapsed := time.Since(start); elapsed < wantExec {
			t.Errorf("answered after %v, before the model's %v", elapsed, wantExec)
		}
		if out != wantOut {
			t.Errorf("X-Output-Size %v, want the model's %v", out, wantOut)
		}
		reply := decodeJSON[replayReply](t, rec.Body.Bytes())
		if reply.Function != f.Name || reply.InputSize != size || reply.OutputSize != wantOut ||
			reply.ExecMillis != float64(wantExec)/float64(time.Millisecond) {
			t.Errorf("reply %+v, want %s at %v: %v, %v", reply, f.Name, size, wantExec, wantOut)
		}
	}
}

// Over many draws the output size averages the model's mean (5% noise).
func TestReplayOutputAveragesTheModelMean(t *testing.T) {
	for _, appName := range workload.Names() {
		app, _ := workload.Lookup(appName)
		for i, f := range app.Chain {
			r, err := newReplayer(replayConfig{app: appName, function: strconv.Itoa(i), seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			size := app.MaxSize / 2
			sum := 0.0
			const n = 2000
			for range n {
				_, out := r.sample(size)
				sum += out
			}
			if mean, want := sum/n, f.OutputMean(size); math.Abs(mean/want-1) > 0.01 {
				t.Errorf("%s/%s: mean output %v, model %v", appName, f.Name, mean, want)
			}
		}
	}
}

func TestReplayNeedsAPositiveInputSize(t *testing.T) {
	h := mustHandler(t, "replay", WithReplay("sentiment-analysis", "0", 1))
	for _, hdr := range []http.Header{
		nil, // the body length says nothing for replay
		{HeaderInputSize: {"0"}},
		{HeaderInputSize: {"-3"}},
		{HeaderInputSize: {"NaN"}},
		{HeaderInputSize: {"Inf"}},
		{HeaderInputSize: {"lots"}},
		{HeaderInputSize: {"65537"}}, // KB: past MaxBody
	} {
		rec := post(h, []byte("12345"), hdr)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("X-Input-Size %q: status %d, want 400", hdr.Get(HeaderInputSize), rec.Code)
		}
		assertOneLine(t, rec)
	}
}

func TestReplaySelectsByNameOrIndex(t *testing.T) {
	app, _ := workload.Lookup("document-summary")
	for i, f := range app.Chain {
		for _, ref := range []string{f.Name, strconv.Itoa(i)} {
			h := mustHandler(t, "replay", WithReplay(app.Name, ref, 1))
			rec, _ := postOK(t, h, nil, http.Header{HeaderInputSize: {"1"}})
			if got := decodeJSON[replayReply](t, rec.Body.Bytes()).Function; got != f.Name {
				t.Errorf("--function %s replays %s, want %s", ref, got, f.Name)
			}
		}
	}
}

// A client that goes away stops the sleep instead of holding the instance.
func TestReplayStopsWhenTheClientLeaves(t *testing.T) {
	r, err := newReplayer(replayConfig{app: "sentiment-analysis", function: "sentiment", seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	if _, err := r.run(ctx, request{size: 64, sizeGiven: true}); err == nil {
		t.Error("a cancelled request succeeded")
	}
	if elapsed := time.Since(start); elapsed > 500*time.Millisecond {
		t.Errorf("a cancelled request took %v", elapsed)
	}
}
