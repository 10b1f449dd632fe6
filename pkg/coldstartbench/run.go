package coldstartbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"time"

	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/ctxtime"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/workload"
)

// Subjects, by what runs the instance.
const (
	RuntimeFloor  = "go-floor"  // the minimal Go server
	RuntimeSlim   = "gantry-fn" // the slim example-functions runtime
	RuntimeGantry = "gantry fn" // the whole gantry binary
)

// row is one subject in one mode: a function of the gateway.
type row struct {
	Row
	fn      stack.Function
	body    []byte
	header  http.Header
	samples []time.Duration
	ready   []time.Duration
	warm    []time.Duration
}

// Run measures every subject, Runs times each, in rounds: one cold start
// of every row per round. An interrupted run (ctx ended) returns what it
// measured, marked Interrupted.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rows, err := prepare(ctx, &o)
	if err != nil {
		return nil, err
	}
	be := backend.NewLocal(backend.LocalConfig{FnRuntime: backend.NoFnRuntime, ReadyTimeout: o.SampleTimeout})
	s := &stack.Stack{}
	for _, r := range rows {
		s.Functions = append(s.Functions, r.fn)
	}
	// The autoscaler plans rarely, so that every start measured is one a
	// request's arrival asked for (scale from zero), never a plan's.
	srv, err := gateway.Start(ctx, gateway.ServerConfig{Addr: "127.0.0.1:0", Stack: s, Backend: be,
		Dispatch: dispatch.Config{Tick: time.Hour, IdleTimeout: time.Hour}})
	if err != nil {
		return nil, err
	}
	defer shutdown(srv)
	b := &bench{o: o, srv: srv, be: be, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	rep := &Report{Runs: o.Runs, Load: loadAverage()}
	for round := 1; round <= o.Runs && ctx.Err() == nil; round++ {
		for _, r := range rows {
			if err := b.sample(ctx, r); err != nil {
				if ctx.Err() != nil {
					break
				}
				return nil, fmt.Errorf("%s (%s): %w", r.Function, r.Mode, err)
			}
		}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "coldstart: round %d of %d\n", round, o.Runs)
		}
	}
	rep.Interrupted = ctx.Err() != nil
	rep.LoadAfter = loadAverage()
	rep.summarize(rows)
	return rep, nil
}

func shutdown(srv *gateway.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	srv.Hurry()
	_ = srv.Shutdown(ctx)
}

// prepare builds the binaries and declares one function per subject and
// mode.
func prepare(ctx context.Context, o *Options) ([]*row, error) {
	floor, err := buildFloor(ctx, o.Cache)
	if err != nil {
		return nil, err
	}
	slim := o.FnRuntime
	if slim == "" && len(o.Functions) > 0 {
		if slim, err = buildFnRuntime(ctx, o.Cache, o.Module); err != nil {
			return nil, err
		}
	}
	type subject struct{ runtime, function, command string }
	subjects := []subject{{RuntimeFloor, "", shellWord(floor)}}
	for _, f := range o.Functions {
		subjects = append(subjects, subject{RuntimeSlim, f, shellWord(slim) + " " + f})
		if o.Gantry != "" {
			subjects = append(subjects, subject{RuntimeGantry, f, shellWord(o.Gantry) + " fn " + f})
		}
	}
	var rows []*row
	for i, sub := range subjects {
		for _, mode := range o.Modes {
			r := &row{Row: Row{Runtime: sub.runtime, Function: sub.function, Mode: mode}}
			r.fn = stack.Function{Name: fmt.Sprintf("s%d-%s", i, mode), Command: sub.command,
				SocketActivation: mode == ModeSocket, MaxScale: 1}
			r.fn.Defaults()
			if sub.function != "" {
				if r.body, r.header, err = payload(sub.function); err != nil {
					return nil, err
				}
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// shellWord quotes a path as one word of a command line.
func shellWord(s string) string { return "'" + s + "'" }

// payloadApp is the app whose chain f starts: its generator makes f's
// input.
func payloadApp(f string) (workload.App, error) {
	for _, name := range workload.Names() {
		app, err := workload.Lookup(name)
		if err == nil && len(app.Chain) > 0 && app.Chain[0].Name == f {
			return app, nil
		}
	}
	return workload.App{}, fmt.Errorf("function %q starts no app's chain, so there is no payload for it; pick one of the chains' first functions", f)
}

// payload is the smallest input of f's app.
func payload(f string) ([]byte, http.Header, error) {
	app, err := payloadApp(f)
	if err != nil {
		return nil, nil, err
	}
	gen, err := functions.Payload(app.Name)
	if err != nil {
		return nil, nil, err
	}
	return gen(app.MinSize, rand.New(rand.NewPCG(1, 2)))
}

type bench struct {
	o      Options
	srv    *gateway.Server
	be     *backend.Local
	client *http.Client
}

// sample waits until no process of r's function exists, then sends one
// request and times its first byte; then the same request again, to the
// instance it started, for the function's own time warm.
func (b *bench) sample(ctx context.Context, r *row) error {
	name := r.fn.Ref()
	if err := b.awaitZero(ctx, name); err != nil {
		return err
	}
	before, _ := b.srv.D.Function(name)
	ttfb, err := b.call(ctx, r)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	after, _ := b.srv.D.Function(name)
	if spawned := after.Stats.Spawned - before.Stats.Spawned; err == nil && spawned != 1 {
		// Not a cold start from zero that this request caused.
		err = fmt.Errorf("%d instances started for one request from zero, want 1", spawned)
	}
	if err != nil {
		r.failed(err)
		return b.retire(name)
	}
	r.samples = append(r.samples, ttfb)
	r.ready = append(r.ready, after.ColdStart)
	if warm, err := b.call(ctx, r); err == nil {
		r.warm = append(r.warm, warm)
	}
	return b.retire(name)
}

// call sends r's request through the gateway and returns the time to the
// first byte of a 200 answer.
func (b *bench) call(ctx context.Context, r *row) (time.Duration, error) {
	sctx, cancel := context.WithTimeout(ctx, b.o.SampleTimeout)
	defer cancel()
	var first time.Time
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Now() }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(sctx, trace), http.MethodPost,
		b.srv.URL()+"/function/"+r.fn.Name, bytes.NewReader(r.body))
	if err != nil {
		return 0, err
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	start := time.Now()
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("answered %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return first.Sub(start), nil
}

func (r *row) failed(err error) {
	r.Errors++
	r.LastError = err.Error()
}

// retire scales the function back to zero.
func (b *bench) retire(name string) error { return b.srv.D.Scale(name, 0) }

// awaitZero waits until no process of the function exists and none is
// starting.
func (b *bench) awaitZero(ctx context.Context, name string) error {
	deadline := time.Now().Add(b.o.SampleTimeout)
	for {
		st, ok := b.srv.D.Function(name)
		if !ok {
			return fmt.Errorf("function %s is gone", name)
		}
		if st.Replicas == 0 && st.Starting == 0 && b.be.Running(name) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still has %d processes after %v", name, b.be.Running(name), b.o.SampleTimeout)
		}
		if st.Available > 0 {
			_ = b.srv.D.Scale(name, 0)
		}
		if err := ctxtime.Sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}
