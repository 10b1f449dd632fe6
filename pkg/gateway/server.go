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
}

// Server is a listening gateway with its dispatcher and autoscaler.
type Server struct {
	D      *dispatch.Dispatcher
	G      *Gateway
	srv    *http.Server
	ln     net.Listener
	stop   context.CancelFunc
	served chan error
	ticks  chan struct{}
	// queue and workers serve async invocations (nil without).
	queue   *async.Queue
	workers *async.Workers

	once    sync.Once
	downErr error
}

// Start deploys the stack, starts the autoscaler and serves on cfg.Addr.
func Start(ctx context.Context, cfg ServerConfig) (*Server, error) {
	d, err := dispatch.New(cfg.Dispatch, cfg.Backend)
	if err != nil {
		return nil, err
	}
	if cfg.Stack != nil {
		if err := d.Load(ctx, cfg.Stack); err != nil {
			_ = d.Close(context.Background())
			return nil, err
		}
	}
	queue, err := openAsync(ctx, cfg)
	if err != nil {
		_ = d.Close(context.Background())
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		closeAsync(queue)
		_ = d.Close(context.Background())
		return nil, err
	}
	cfg.Gateway.Dispatcher = d
	cfg.Gateway.Async = queue
	g := New(cfg.Gateway)
	s := &Server{D: d, G: g, ln: ln, served: make(chan error, 1), ticks: make(chan struct{}), queue: queue,
		srv: &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}}
	actx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { d.Run(actx); close(s.ticks) }()
	s.startWorkers(cfg.Gateway.Logger)
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the gateway listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the gateway's base URL.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Shutdown drains: it stops accepting, lets accepted requests finish
// (queued ones included, so the autoscaler keeps running) until ctx ends,
// then stops the autoscaler and every instance. Later calls return the
// first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() { s.downErr = s.shutdown(ctx) })
	return s.downErr
}

func (s *Server) shutdown(ctx context.Context) error {
	drainErr := s.srv.Shutdown(ctx)
	if drainErr != nil {
		_ = s.srv.Close()
	}
	if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		drainErr = errors.Join(drainErr, err)
	}
	s.stopWorkers(ctx)
	s.stop()
	<-s.ticks
	s.G.Close()
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := s.D.Close(cctx)
	closeAsync(s.queue)
	if err != nil {
		return errors.Join(drainErr, fmt.Errorf("stopping instances: %w", err))
	}
	return drainErr
}
