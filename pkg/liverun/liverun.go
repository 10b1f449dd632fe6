// Package liverun is Gantry's main job on one machine: it starts the gateway
// with the example functions on the local process runtime, drives one app
// with open-loop load, and reports what the policy achieved: SLO compliance,
// instances spawned and live, latency, and every error.
package liverun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"gantry.dev/gantry/examples"
	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// ErrBadConfig marks a configuration Run cannot use.
var ErrBadConfig = errors.New("bad run configuration")

// Config is one live run.
type Config struct {
	// Policy decides (default gantry).
	Policy string
	// App is the example app the load targets (default audio-translation).
	App string
	// Trace shapes the arrivals (poisson, wiki, twitter); Rate is its
	// mean in requests per second.
	Trace string
	Rate  float64
	// Dist draws input sizes (heavy, medial, light, uniform).
	Dist string
	// Warmup runs the same load first, unmeasured, so every policy starts
	// from a platform that has seen the load (default 15 s; negative: none).
	Warmup   time.Duration
	Duration time.Duration
	Seed     uint64
	// Capacity bounds the instances (0: none); StartDelay emulates a
	// container's start-up.
	Capacity   int
	StartDelay time.Duration
	// Stack replaces the embedded examples/stack.yml.
	Stack *stack.Stack
	// Replay serves App as the simulator models it (ReplayStack: every
	// function is `gantry fn replay`, with the simulator's SLO split)
	// instead of the example functions, so that a run can be set against
	// sim.Run on the same trace. It excludes Stack.
	Replay bool
	// Tick, Window and IdleTimeout configure the dispatcher (zero: its
	// defaults, 250 ms, 10 s and 60 s).
	Tick, Window, IdleTimeout time.Duration
	// Progress is called about every second of the measured run.
	Progress func(p Progress)
	Logger   *slog.Logger
	// InstanceLog receives the instances' output (default discarded).
	InstanceLog io.Writer
}

// Progress is a snapshot during the run.
type Progress struct {
	Phase          string // "warmup" or "measure"
	Elapsed, Total time.Duration
	Sent, Done     int64
	Live           int
}

// DefaultApp is the chain `gantry up` drives: three functions, so the
// Look-Ahead Scaler has work to do.
const DefaultApp = "audio-translation"

// Bounds on a run.
const (
	MaxDuration = 24 * time.Hour
	MaxRate     = 5000
)

func (c *Config) defaults() {
	if c.Policy == "" {
		c.Policy = "gantry"
	}
	if c.App == "" {
		c.App = DefaultApp
	}
	if c.Trace == "" {
		c.Trace = "poisson"
	}
	if c.Dist == "" {
		c.Dist = "uniform"
	}
	if c.Rate == 0 {
		c.Rate = 20
	}
	if c.Duration == 0 {
		c.Duration = time.Minute
	}
	if c.Warmup == 0 {
		c.Warmup = 15 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	switch {
	case !(c.Rate > 0) || c.Rate > MaxRate:
		return fmt.Errorf("%w: rate %v must be in (0, %d]", ErrBadConfig, c.Rate, MaxRate)
	case c.Duration < time.Second || c.Duration > MaxDuration:
		return fmt.Errorf("%w: duration %v must be in [1s, %v]", ErrBadConfig, c.Duration, MaxDuration)
	case c.Warmup > MaxDuration:
		return fmt.Errorf("%w: warm-up %v must be at most %v", ErrBadConfig, c.Warmup, MaxDuration)
	case c.Tick < 0 || c.Window < 0 || c.IdleTimeout < 0:
		return fmt.Errorf("%w: tick %v, window %v and idle timeout %v must not be negative", ErrBadConfig, c.Tick, c.Window, c.IdleTimeout)
	case c.Replay && c.Stack != nil:
		return fmt.Errorf("%w: a replay run builds its own stack", ErrBadConfig)
	}
	return nil
}

// Run serves the example functions, drives the load and reports.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var calib calibration
	if cfg.Replay {
		model, err := workload.Lookup(cfg.App)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
		}
		if cfg.Progress != nil {
			cfg.Progress(Progress{Phase: "calibrate"})
		}
		if calib, err = calibrate(ctx, cfg, model); err != nil {
			return nil, err
		}
	}
	plan, err := newPlan(cfg, calib.ColdStart)
	if err != nil {
		return nil, err
	}
	colds := &coldStartLog{}
	be := recordingBackend{Backend: backend.NewLocal(backend.LocalConfig{StartDelay: cfg.StartDelay,
		Log: instanceLog(cfg), Logger: cfg.Logger}), log: colds}
	srv, err := gateway.Start(ctx, gateway.ServerConfig{Addr: "127.0.0.1:0", Stack: plan.stack, Backend: be,
		Dispatch: dispatch.Config{Policy: cfg.Policy, Capacity: cfg.Capacity, Seed: cfg.Seed, Logger: cfg.Logger,
			Tick: cfg.Tick, Window: cfg.Window, IdleTimeout: cfg.IdleTimeout},
		Gateway: gateway.Config{Logger: cfg.Logger}})
	if err != nil {
		return nil, err
	}
	// The policy's clock (its windows and the autoscaler's ticks) starts
	// when the gateway deploys the stack, just before this.
	started := time.Now()
	defer shutdown(srv)
	rep, err := plan.drive(ctx, cfg, srv)
	if err != nil {
		return nil, err
	}
	if cfg.Replay {
		rep.replay = &replayFacts{calib: calib, coldStarts: colds.between(rep.from, rep.to),
			loadOffset: rep.load.Start.Sub(started)}
	}
	return rep, nil
}

// plan is what a run sends: the stack, the app's chain and its load.
type plan struct {
	stack   *stack.Stack
	app     stack.App
	model   workload.App
	dist    workload.Distribution
	payload functions.PayloadFunc
	slo     time.Duration
}

// newPlan builds what a run sends; coldStart is the replay stack's planned
// cold start.
func newPlan(cfg Config, coldStart time.Duration) (*plan, error) {
	s := cfg.Stack
	if cfg.Replay {
		model, err := workload.Lookup(cfg.App)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
		}
		if s, err = ReplayStack(model, coldStart); err != nil {
			return nil, err
		}
	}
	if s == nil {
		var err error
		if s, err = stack.Parse("examples/stack.yml", examples.Stack); err != nil {
			return nil, err
		}
	}
	p := &plan{stack: s}
	found := false
	for _, a := range s.Apps {
		if a.Name == cfg.App {
			p.app, found = a, true
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: app %q is not in the stack", ErrBadConfig, cfg.App)
	}
	var err error
	if p.model, err = workload.Lookup(cfg.App); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if p.dist, err = workload.LookupDist(cfg.Dist); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	payload := cfg.App
	if cfg.Replay {
		payload = "replay:" + cfg.App
	}
	if p.payload, err = functions.Payload(payload); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	p.slo = p.app.SLO
	if p.slo == 0 {
		for _, name := range p.app.Functions {
			for _, f := range s.Functions {
				if f.Name == name {
					p.slo += f.SLO
				}
			}
		}
	}
	return p, nil
}

func (p *plan) load(cfg Config, srv *gateway.Server, length time.Duration, seed uint64, phase string) (loadgen.Config, error) {
	tr, err := trace.Generate(cfg.Trace, cfg.Rate, length, seed)
	if err != nil {
		return loadgen.Config{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	lc := loadgen.Config{URL: srv.URL() + "/app/" + p.app.Name, Trace: tr, Dist: p.dist,
		MinSize: p.model.MinSize, MaxSize: p.model.MaxSize, Payload: loadgen.Payload(p.payload),
		Pool: 4, Seed: seed, SLO: p.slo, ProgressEvery: time.Second}
	if cfg.Replay {
		// A pooled payload carries its bucket's middle size in
		// X-Input-Size, which would quantize the sizes to 16 values where
		// the simulator draws them exactly; replay bodies are tiny, so
		// each request builds its own.
		lc.Pool = 0
		// bench simlive promises to stop within a second of SIGINT.
		lc.Drain = 500 * time.Millisecond
	}
	if cfg.Progress != nil {
		lc.Progress = func(sent, done int64, elapsed, total time.Duration) {
			cfg.Progress(Progress{Phase: phase, Elapsed: elapsed, Total: total, Sent: sent, Done: done, Live: srv.D.Live()})
		}
	}
	return lc, nil
}

func (p *plan) drive(ctx context.Context, cfg Config, srv *gateway.Server) (*Report, error) {
	if cfg.Warmup > 0 {
		lc, err := p.load(cfg, srv, cfg.Warmup, cfg.Seed+1000, "warmup")
		if err != nil {
			return nil, err
		}
		if _, err := loadgen.Run(ctx, lc); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	before := snapshot(srv.D)
	smp := startSampler(srv.D)
	lc, err := p.load(cfg, srv, cfg.Duration, cfg.Seed, "measure")
	if err != nil {
		smp.stop()
		return nil, err
	}
	res, err := loadgen.Run(ctx, lc)
	smp.stop()
	if err != nil {
		return nil, err
	}
	after := snapshot(srv.D)
	return newReport(cfg, p, res, before, after, smp.series()), nil
}

// counters is the dispatcher's state at one instant.
type counters struct {
	at              time.Time
	instanceSeconds float64
	spawned         int64
	perFunction     map[string]dispatch.FunctionStats
}

func snapshot(d *dispatch.Dispatcher) counters {
	t := d.Totals()
	c := counters{at: t.At, instanceSeconds: t.InstanceSeconds, perFunction: map[string]dispatch.FunctionStats{}}
	for _, f := range d.Functions() {
		c.spawned += f.Stats.Spawned
		c.perFunction[f.Decl.Name] = f.Stats
	}
	return c
}

// sampler records the live instances every sampleEvery for the plot.
type sampler struct {
	mu     sync.Mutex
	points []LivePoint
	done   chan struct{}
	wg     sync.WaitGroup
}

// LivePoint is the live instances at an offset from the measured start.
type LivePoint struct {
	Offset time.Duration
	Live   int
}

const sampleEvery = 250 * time.Millisecond

func startSampler(d *dispatch.Dispatcher) *sampler {
	s := &sampler{done: make(chan struct{})}
	start := time.Now()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			s.mu.Lock()
			s.points = append(s.points, LivePoint{Offset: time.Since(start), Live: d.Live()})
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() {
	close(s.done)
	s.wg.Wait()
}

func (s *sampler) series() []LivePoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]LivePoint(nil), s.points...)
}
