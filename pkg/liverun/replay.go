package liverun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/ctxtime"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/workload"
)

// ReplayStack declares app for the live platform as the simulator sees it:
// each function of the chain is `gantry fn replay`, which sleeps for the
// simulator's execution-time model and reports its output-size model, with
// the simulator's per-function SLO budgets and the app's SLO, so the live
// policy is given exactly the spec a simulation of app gives it.
//
// coldStart is what the policy plans with until it measures one (the
// simulator's policy plans with its configured cold start).
func ReplayStack(app workload.App, coldStart time.Duration) (*stack.Stack, error) {
	slos := sim.FunctionSLOs(app)
	s := &stack.Stack{Apps: []stack.App{{Name: app.Name, SLO: app.SLO}}}
	lo, hi := app.MinSize, app.MaxSize
	for i, f := range app.Chain {
		fn := stack.Function{
			Name:    f.Name,
			Command: fmt.Sprintf("gantry fn replay --app %s --function %d", app.Name, i),
			// gantry fn takes a passed socket: requests queue on it
			// from the moment an instance's process exists.
			SocketActivation: true,
			SLO:              slos[i],
			// The simulator places no per-function bound below its
			// cluster's 288 cores; the default of 20 would be one.
			MaxScale:      stack.MaxInstances,
			Concurrency:   1, // a simulated container runs one request at a time
			SizeHeader:    functions.HeaderInputSize,
			MinSize:       lo,
			MaxSize:       hi,
			SizeSensitive: f.SizeSensitive,
			ColdStart:     coldStart,
		}
		if i == 0 && stack.UnitBytes(app.SizeUnit) > 0 {
			// The app's unit is its first function's; the synthetic
			// app's ms is no byte size.
			fn.SizeUnit = app.SizeUnit
		}
		fn.Defaults()
		s.Functions = append(s.Functions, fn)
		s.Apps[0].Functions = append(s.Apps[0].Functions, f.Name)
		lo, hi = outputRange(f, lo, hi)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("replay stack for %s: %w", app.Name, err)
	}
	return s, nil
}

// outputRange is the range of f's outputs for inputs in [lo, hi], which is
// the next function's input range. The policy bins only the first
// function's range, so this one needs to be valid more than tight: the mean
// outputs at the ends are widened for the output noise, and at least by a
// fifth so that a constant output (sentiment's label) still gives min < max.
func outputRange(f workload.Function, lo, hi float64) (float64, float64) {
	a, b := f.OutputMean(lo), f.OutputMean(hi)
	lo, hi = min(a, b), max(a, b)
	widen := 1 + max(4*f.OutputNoise, 0.2)
	return lo / widen, hi * widen
}

// calibration is measured on a throwaway gateway before a replay run, so
// that the run itself starts from a platform that has served nothing.
type calibration struct {
	// ColdStart is the mean spawn-to-ready of calibrateInstances instances
	// started together: what the run's policy plans with.
	ColdStart time.Duration
	// Overhead is the median of (round trip through the gateway − the
	// execution time the instance replayed) over calibrateRequests
	// sequential requests: HTTP hops, dispatch and timer lateness, which
	// the simulator does not have.
	Overhead time.Duration
}

const (
	calibrateInstances = 2
	calibrateRequests  = 20
)

// calibrate serves the app's first function alone (held at
// calibrateInstances instances by its minimum scale), waits for its
// instances and times sequential requests of the smallest input size,
// whose execution time is the shortest and the least noisy.
func calibrate(ctx context.Context, cfg Config, app workload.App) (calibration, error) {
	s, err := ReplayStack(app, cfg.StartDelay)
	if err != nil {
		return calibration{}, err
	}
	fn := s.Functions[0]
	fn.MinScale = calibrateInstances
	be := backend.NewLocal(backend.LocalConfig{StartDelay: cfg.StartDelay, Log: instanceLog(cfg), Logger: cfg.Logger})
	srv, err := gateway.Start(ctx, gateway.ServerConfig{Addr: "127.0.0.1:0", Stack: &stack.Stack{Functions: []stack.Function{fn}},
		Backend: be, Dispatch: dispatch.Config{Policy: "atoll", Tick: cfg.Tick, Logger: cfg.Logger},
		Gateway: gateway.Config{Logger: cfg.Logger}})
	if err != nil {
		return calibration{}, err
	}
	defer shutdown(srv)
	var st dispatch.FunctionStatus
	for {
		st, _ = srv.D.Function(fn.Name)
		if st.Stats.Ready >= calibrateInstances {
			break
		}
		if st.Stats.StartFailures > 0 {
			return calibration{}, fmt.Errorf("calibration: an instance of %s failed to start (run with --verbose for its output)", fn.Name)
		}
		if err := ctxtime.Sleep(ctx, 10*time.Millisecond); err != nil {
			return calibration{}, err
		}
	}
	c := calibration{ColdStart: st.Stats.ColdStartSum / time.Duration(st.Stats.Ready)}
	client := &http.Client{Timeout: 10 * time.Second}
	over := make([]time.Duration, 0, calibrateRequests)
	for range calibrateRequests {
		d, err := timeReplay(ctx, client, srv.URL()+"/function/"+fn.Name, app.MinSize)
		if err != nil {
			return calibration{}, fmt.Errorf("calibration: %w", err)
		}
		over = append(over, d)
	}
	slices.Sort(over)
	c.Overhead = over[len(over)/2]
	return c, nil
}

// timeReplay sends one replay request and returns its round trip less the
// execution time the instance says it replayed.
func timeReplay(ctx context.Context, client *http.Client, url string, size float64) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	req.Header.Set(functions.HeaderInputSize, strconv.FormatFloat(size, 'g', -1, 64))
	begin := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(begin)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var reply struct {
		ExecMillis float64 `json:"exec_ms"`
	}
	if err := json.Unmarshal(body, &reply); err != nil {
		return 0, fmt.Errorf("%s: reply %q: %w", url, body, err)
	}
	return took - time.Duration(reply.ExecMillis*float64(time.Millisecond)), nil
}

func instanceLog(cfg Config) io.Writer {
	if cfg.InstanceLog == nil {
		return io.Discard
	}
	return cfg.InstanceLog
}

// shutdown stops a gateway and its instances, bounded so that an instance
// that ignores SIGTERM cannot hang the command.
func shutdown(srv *gateway.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// replayFacts is what a replay run measured for the comparison with the
// simulator.
type replayFacts struct {
	calib calibration
	// coldStarts are the spawn-to-ready times of the instances that
	// became ready during the measured phase.
	coldStarts []time.Duration
	// loadOffset runs from the deployment (the origin of the policy's
	// windows and of the autoscaler's ticks) to the load's first instant.
	loadOffset time.Duration
}

// coldStartLog keeps every instance's spawn-to-ready, of which the
// dispatcher keeps only the sum, so that a report can give their spread.
type coldStartLog struct {
	mu   sync.Mutex
	at   []time.Time
	cold []time.Duration
}

func (l *coldStartLog) add(at time.Time, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, at)
	l.cold = append(l.cold, d)
}

// between returns the cold starts of instances ready within [from, to].
func (l *coldStartLog) between(from, to time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for i, at := range l.at {
		if !at.Before(from) && !at.After(to) {
			out = append(out, l.cold[i])
		}
	}
	return out
}

// recordingBackend is a backend whose Ready events are also logged.
type recordingBackend struct {
	backend.Backend
	log *coldStartLog
}

func (b recordingBackend) Attach(ev backend.Events) {
	b.Backend.Attach(recordingEvents{Events: ev, log: b.log})
}

type recordingEvents struct {
	backend.Events
	log *coldStartLog
}

func (e recordingEvents) Ready(inst backend.Instance) {
	e.log.add(time.Now(), inst.ColdStart)
	e.Events.Ready(inst)
}
