package functions

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"gantry.dev/gantry/pkg/ctxtime"
	"gantry.dev/gantry/pkg/workload"
)

const replayName = "replay"

var replaySpec = spec{
	name: replayName,
	summary: "sleep for the simulator's execution-time model (with noise) of any app's function " +
		"and report its output-size model; needs X-Input-Size",
	serves: []string{"any app/function (model replay)"},
	// The unit is the app's; replay requires X-Input-Size and reports its
	// output size itself, so the unit's byte count is never used.
	inUnit: appUnit, outUnit: appUnit,
	build: newReplay,
}

// replayer replays one workload function's models.
type replayer struct {
	app     workload.App
	fn      workload.Function
	maxSize float64 // MaxBody in the app's unit
	mu      sync.Mutex
	rng     *rand.Rand // not safe for concurrent use, hence mu
}

func newReplay(o options) (runFunc, error) {
	r, err := newReplayer(*o.replay)
	if err != nil {
		return nil, err
	}
	return r.run, nil
}

func newReplayer(c replayConfig) (*replayer, error) {
	app, err := workload.Lookup(c.app)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOption, err)
	}
	fn, err := chainFunction(app, c.function)
	if err != nil {
		return nil, err
	}
	u, err := unitNamed(app.SizeUnit)
	if err != nil {
		return nil, fmt.Errorf("%w: app %s: %w", ErrBadOption, app.Name, err)
	}
	return &replayer{app: app, fn: fn, maxSize: MaxBody / u.bytes, rng: newRand(c.seed)}, nil
}

// chainFunction finds a function of the app's chain by name or by 0-based
// index, the two ways a stack file can name it.
func chainFunction(app workload.App, ref string) (workload.Function, error) {
	for _, f := range app.Chain {
		if f.Name == ref {
			return f, nil
		}
	}
	if i, err := strconv.Atoi(ref); err == nil && i >= 0 && i < len(app.Chain) {
		return app.Chain[i], nil
	}
	names := make([]string, len(app.Chain))
	for i, f := range app.Chain {
		names[i] = f.Name
	}
	return workload.Function{}, fmt.Errorf("%w: app %s has no function %q (by name or 0-based index: %s)",
		ErrBadOption, app.Name, ref, strings.Join(names, ", "))
}

// newRand seeds the noise; seed 0 draws a random seed so that replicas
// started alike do not replay the same noise in lockstep.
func newRand(seed uint64) *rand.Rand {
	if seed == 0 {
		seed = rand.Uint64()
	}
	return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
}

type replayReply struct {
	App        string  `json:"app"`
	Function   string  `json:"function"`
	InputSize  float64 `json:"input_size"`
	OutputSize float64 `json:"output_size"`
	ExecMillis float64 `json:"exec_ms"`
}

// run sleeps for a sampled execution time, as the paper's evaluation does,
// and reports the sampled output size as X-Output-Size.
func (r *replayer) run(ctx context.Context, req request) (result, error) {
	if err := r.checkSize(req); err != nil {
		return result{}, err
	}
	exec, out := r.sample(req.size)
	if err := ctxtime.Sleep(ctx, exec); err != nil {
		return result{}, fmt.Errorf("request cancelled after part of its %v: %w", exec, err)
	}
	body, err := json.Marshal(replayReply{
		App: r.app.Name, Function: r.fn.Name, InputSize: req.size, OutputSize: out,
		ExecMillis: float64(exec) / float64(time.Millisecond),
	})
	if err != nil {
		return result{}, err
	}
	return result{
		body: body, contentType: "application/json",
		outSize: out, hasOutSize: true, work: int64(exec),
	}, nil
}

// checkSize wants an explicit positive size: the body is a placeholder, so
// its length says nothing.
func (r *replayer) checkSize(req request) error {
	switch {
	case !req.sizeGiven:
		return badInput("replay needs the input size in %s", HeaderInputSize)
	case req.size <= 0:
		return badInput("%s must be positive, got %v", HeaderInputSize, req.size)
	case req.size > r.maxSize:
		return badInput("%s %v %s is past the %d-byte bound", HeaderInputSize, req.size, r.app.SizeUnit, MaxBody)
	}
	return nil
}

// sample draws the execution time and then the output size, in that order,
// from the one stream, so a seed fixes both sequences.
func (r *replayer) sample(size float64) (time.Duration, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fn.Exec(size, r.rng), r.fn.Output(size, r.rng)
}
