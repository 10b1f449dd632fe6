package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"gantry.dev/gantry/pkg/async"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

// ServerConfig is everything a running gateway needs.
type ServerConfig struct {
	Addr     string
	Stack    *stack.Stack // may be nil: functions then come over the API
	Dispatch dispatch.Config
	Backend  backend.Backend
	Gateway  Config // Dispatcher is filled in
	// State is the gateway's open state folder (../shared/conventions.md);
	// nil keeps nothing across restarts. The caller opens and closes it.
	State *statedir.Dir
	// Async configures the queue of async invocations (async.go); nil
	// serves none.
	Async *async.Config
	// Limits bound client connections in time (zero fields: defaults).
	Limits Limits
}

// Server is a listening gateway with its dispatcher and autoscaler.
type Server struct {
	D     *dispatch.Dispatcher
	G     *Gateway
	srv   *http.Server
	guard *guard
	ln    net.Listener
	// hurry cuts the drain short: a second signal.
	hurry     context.Context
	hurryStop context.CancelFunc
	stop      context.CancelFunc
	served    chan error
	ticks     chan struct{}
	// queue and workers serve async invocations (nil without).
	queue   *async.Queue
	workers *async.Workers

	once    sync.Once
	downErr error
}

// Start deploys the stack, starts the autoscaler and serves on cfg.Addr.
func Start(ctx context.Context, cfg ServerConfig) (*Server, error) {
	keepRecords(cfg)
	d, err := dispatch.New(cfg.Dispatch, cfg.Backend)
	if err != nil {
		return nil, err
	}
	queue, err := openAsync(ctx, cfg)
	if err != nil {
		_ = d.Close(context.Background())
		return nil, err
	}
	cfg.Gateway.Dispatcher = d
	cfg.Gateway.Async = queue
	cfg.Gateway.State = cfg.State
	g := New(cfg.Gateway)
	g.attachLocal(cfg.Backend)
	// The functions kept in the state folder, then the stack (persist.go).
	if err := g.restore(ctx, cfg.Stack); err != nil {
		g.Close()
		closeAsync(queue)
		_ = d.Close(context.Background())
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		g.Close()
		closeAsync(queue)
		_ = d.Close(context.Background())
		return nil, err
	}
	lim := cfg.Limits.withDefaults()
	guard := newGuard(g, lim, func(name string) (time.Duration, bool) {
		f, ok := g.Resolve(name)
		return f.Timeout, ok
	})
	s := &Server{D: d, G: g, ln: ln, served: make(chan error, 1), ticks: make(chan struct{}), guard: guard, queue: queue,
		srv: &http.Server{Handler: guard, ReadHeaderTimeout: lim.ReadHeader, IdleTimeout: lim.Idle}}
	s.srv.RegisterOnShutdown(g.EndStreams)
	s.hurry, s.hurryStop = context.WithCancel(context.Background())
	actx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { d.Run(actx); close(s.ticks) }()
	s.startWorkers(cfg.Gateway.Logger)
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// recordKeeper is a backend that records its instances in the state folder
// and stops those a previous run left (backend.Local).
type recordKeeper interface {
	KeepRecords(dir string) (int, error)
}

// keepRecords stops the instances a crashed gateway left behind and has
// the backend record its own, when there is a state folder.
func keepRecords(cfg ServerConfig) {
	rk, ok := cfg.Backend.(recordKeeper)
	if !ok || cfg.State == nil {
		return
	}
	n, err := rk.KeepRecords(cfg.State.Sub(statedir.Instances))
	if n > 0 && cfg.Gateway.Logger != nil {
		cfg.Gateway.Logger.Warn("stopped instances a previous gateway left running", "processes", n)
	}
	if err != nil && cfg.Gateway.Logger != nil {
		cfg.Gateway.Logger.Warn("instance records", "err", err)
	}
}

// Addr is the address the gateway listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the gateway's base URL.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Shutdown drains: it stops accepting, lets accepted requests finish
// (queued ones included, so the autoscaler keeps running) until ctx ends,
// then answers every request still open, 503 with Retry-After if no
// instance received it and 504 with MayHaveRunHeader if one did; when the
// instances outlive the gateway (Config.KeepsInstances) it then holds the
// slots of the requests it ended until their instance must have finished
// them; then it stops the autoscaler and every instance. It returns nil
// when every accepted request got its answer. Later calls return the
// first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() { s.downErr = s.shutdown(ctx) })
	return s.downErr
}

// Hurry cuts a drain short, as a second SIGTERM does: open requests are
// answered at once and instances are killed without waiting for them.
func (s *Server) Hurry() { s.hurryStop() }

// answerGrace bounds how long, once the drain ends, the handlers may take
// to write their answers; hurried, hurryGrace.
const (
	answerGrace = 2 * time.Second
	hurryGrace  = 300 * time.Millisecond
)

func (s *Server) shutdown(ctx context.Context) error {
	defer s.hurryStop()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopHurry := context.AfterFunc(s.hurry, cancel)
	s.G.beginDrain()
	drainErr := s.srv.Shutdown(dctx)
	stopHurry()
	if drainErr != nil {
		drainErr = s.answerOpen()
	}
	if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		drainErr = errors.Join(drainErr, err)
	}
	// Instances that outlive this gateway may still run what the drain
	// ended: their slots stay busy, and this replica keeps deciding (its
	// Lease) until they must have finished.
	s.G.waitHeld(s.hurry)
	// The async jobs running get what is left of the drain, and a second
	// signal ends their wait too (before, it waited on, for a job held by
	// an instance still starting, up to the start timeout): those not
	// finished go back to the queue.
	wctx, wcancel := context.WithCancel(ctx)
	stopW := context.AfterFunc(s.hurry, wcancel)
	s.stopWorkers(wctx)
	stopW()
	wcancel()
	s.stop()
	<-s.ticks
	s.G.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer ccancel()
	stop := context.AfterFunc(s.hurry, ccancel)
	defer stop()
	err := s.D.Close(cctx)
	closeAsync(s.queue)
	if err != nil && s.hurry.Err() == nil {
		return errors.Join(drainErr, fmt.Errorf("stopping instances: %w", err))
	}
	return drainErr
}

// answerOpen ends every request still open at the drain's deadline with
// an answer and waits, briefly, for the answers to go out; past that it
// closes what is left.
func (s *Server) answerOpen() error {
	grace := answerGrace
	if s.hurry.Err() != nil {
		grace = hurryGrace
	}
	actx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	stop := context.AfterFunc(s.hurry, func() {
		// A second signal while answering: what is answered by now is.
		time.AfterFunc(hurryGrace, cancel)
	})
	defer stop()
	s.G.endExchanges()
	err := s.guard.end(actx)
	if err == nil {
		// Handlers have returned: net/http flushes their answers and the
		// connections go idle, which a second Shutdown waits for. Its
		// listener is closed already, which it reports: not a failure.
		if serr := s.srv.Shutdown(actx); serr != nil && actx.Err() != nil {
			err = serr
		}
	}
	if err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("drain: requests left unanswered: %w", err)
	}
	return nil
}
