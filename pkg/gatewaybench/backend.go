package gatewaybench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

// echo is the function: it answers POST / with the request's body, as an
// of-watchdog function that does no work would. Any other method gets an
// empty 200 so that health probes pass.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	_, _ = io.Copy(w, r.Body)
})

// server is an HTTP server on a loopback port of its own.
type server struct {
	srv *http.Server
	ln  net.Listener
	// done is closed when Serve returns.
	done chan struct{}
}

// listen serves h on 127.0.0.1 at a free port. Loopback only: every path
// of the benchmark stays on this machine.
func listen(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}}
	go func() { _ = s.srv.Serve(ln); close(s.done) }()
	return s, nil
}

func (s *server) addr() string { return s.ln.Addr().String() }
func (s *server) url() string  { return "http://" + s.addr() }

// close stops at once: the benchmark is over, or interrupted, and nothing
// it still has in flight is worth waiting for.
func (s *server) close() {
	_ = s.srv.Close()
	<-s.done
}

// Static is a backend whose every instance is one address that already
// serves: the benchmark's in-process instance. Gantry's gateway runs
// unchanged on top of it (dispatcher, policy, slots, forwarding); only the
// process spawning of the local runtime is left out, because the instance
// must be the very one the other paths call.
type Static struct {
	addr string
	ev   backend.Events

	mu  sync.Mutex
	fns map[string]bool
	seq int
}

// NewStatic returns a backend that reports addr (host:port) as every
// instance it is asked to start.
func NewStatic(addr string) *Static { return &Static{addr: addr, fns: map[string]bool{}} }

func (s *Static) Attach(ev backend.Events) { s.ev = ev }

func (s *Static) Deploy(_ context.Context, f stack.Function) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fns[f.Name] = true
	return nil
}

func (s *Static) Undeploy(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fns, name)
	return nil
}

// Start reports n instances Ready at once. Each has its own ID, as the
// dispatcher tracks slots per instance, but they share the one address:
// with MaxScale 1 the dispatcher asks for one, and should it ask for more,
// more slots on the same server are still a faithful answer.
func (s *Static) Start(function string, n int) {
	s.mu.Lock()
	known := s.fns[function]
	ids := make([]string, 0, n)
	for range n {
		s.seq++
		ids = append(ids, fmt.Sprintf("%s-static-%d", function, s.seq))
	}
	s.mu.Unlock()
	for _, id := range ids {
		// Events must come from the backend's own goroutine, never from
		// inside the dispatcher's call (it holds its lock).
		if !known {
			go s.ev.Failed(function, fmt.Errorf("%w: %q", backend.ErrNotDeployed, function))
			continue
		}
		go s.ev.Ready(backend.Instance{ID: id, Function: function, Addr: s.addr})
	}
}

// Stop reports the instance gone; the server itself belongs to the caller
// and keeps serving the other paths.
func (s *Static) Stop(inst backend.Instance) { go s.ev.Exited(inst, nil) }

func (s *Static) Close(context.Context) error { return nil }

// benchFunction is the function as Gantry's gateway knows it: one instance
// kept (MinScale = MaxScale = 1) that takes as many requests at once as
// Gantry allows, so the gateway never queues behind an artificial slot
// limit that the OpenFaaS gateway, which has none, would not see.
func benchFunction(name string) stack.Function {
	f := stack.Function{Name: name, Command: "static", MinScale: 1, MaxScale: 1,
		Concurrency: stack.MaxConcurrency, SizeSensitive: true}
	f.Defaults()
	return f
}
