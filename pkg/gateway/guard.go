package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gantry.dev/gantry/pkg/dispatch"
)

// Limits bound every client connection in time, so that slow or stalled
// clients cannot hold the gateway's memory or file descriptors.
type Limits struct {
	// ReadHeader bounds reading a request's headers (default 10 s).
	ReadHeader time.Duration
	// BodyIdle bounds the gap between two reads of a request body that
	// bring bytes (default 30 s).
	BodyIdle time.Duration
	// Body bounds reading a whole request body; zero means the invoked
	// function's timeout (for other routes, DefaultBodyBound).
	Body time.Duration
	// WriteExtra is added to the function's timeout to bound writing the
	// answer, from the first byte written (default 5 s).
	WriteExtra time.Duration
	// Idle bounds a keep-alive connection between requests (default 90 s).
	Idle time.Duration
}

// DefaultBodyBound bounds reading the body of a request that names no
// function (the management API), and the write of its answer.
const DefaultBodyBound = 30 * time.Second

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeader, 10*time.Second)
	def(&l.BodyIdle, 30*time.Second)
	def(&l.WriteExtra, 5*time.Second)
	def(&l.Idle, 90*time.Second)
	return l
}

// errDrained is the cause of a request's context when the gateway stops
// waiting for it at the end of a drain: it is answered 503 if it never
// reached an instance, 504 if it did.
var errDrained = errors.New("the gateway is shutting down")

// Headers of the answers a drain gives.
const (
	// MayHaveRunHeader is set on a 504 for a request an instance received
	// but did not answer before the gateway stopped: it may have run.
	MayHaveRunHeader = "X-Gantry-May-Have-Run"
)

// drainFailure is how a request whose context ended is answered when the
// drain ended it; nil otherwise. delivered says an instance received it.
func drainFailure(ctx context.Context, delivered bool) *failure {
	if !errors.Is(context.Cause(ctx), errDrained) {
		return nil
	}
	return drainAnswer(delivered)
}

// drainAnswer is the answer to a request open when the drain ends.
func drainAnswer(delivered bool) *failure {
	if delivered {
		return &failure{http.StatusGatewayTimeout, "drained_delivered", errors.New("the gateway shut down before the instance answered; the function may have run")}
	}
	return &failure{http.StatusServiceUnavailable, "drained", errors.New("the gateway is shutting down; retry")}
}

// bodyFailure is the answer to a body that did not come: 503 if the drain
// stopped waiting for it, 408 if the client was too slow; nil otherwise.
func bodyFailure(err error) *failure {
	switch {
	case errors.Is(err, errDrained):
		return &failure{http.StatusServiceUnavailable, "drained", errors.New("the gateway is shutting down; retry")}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &failure{http.StatusRequestTimeout, "body_timeout", errors.New("the request body came too slowly")}
	}
	return nil
}

// failHeaders sets the headers a failure's answer carries.
func failHeaders(h http.Header, f *failure) {
	switch f.outcome {
	case "drained":
		h.Set("Retry-After", "1")
	case "drained_delivered":
		h.Set(MayHaveRunHeader, "true")
	}
}

// guard wraps the gateway's routes: it bounds each request's body reads
// and answer writes, and ends every open request when the drain ends.
type guard struct {
	next    http.Handler
	limits  Limits
	timeout func(function string) (time.Duration, bool)

	drain  context.Context // cancelled (cause errDrained) when the drain ends
	abort  context.CancelCauseFunc
	active sync.WaitGroup
	// open counts the handlers running: what clients hold of the gateway.
	open atomic.Int64
}

func newGuard(next http.Handler, limits Limits, timeout func(string) (time.Duration, bool)) *guard {
	g := &guard{next: next, limits: limits.withDefaults(), timeout: timeout}
	g.drain, g.abort = context.WithCancelCause(context.Background())
	return g
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.active.Add(1)
	defer g.active.Done()
	g.open.Add(1)
	defer g.open.Add(-1)
	start := time.Now()
	bound := DefaultBodyBound
	if fn, ok := functionOf(r.URL.Path); ok {
		if t, ok := g.timeout(fn); ok {
			bound = t
		}
	}
	if g.limits.Body > 0 {
		bound = g.limits.Body
	}
	rc := http.NewResponseController(w)
	// A keep-alive connection's last answer left its write deadline.
	_ = rc.SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	body := &boundedBody{r: r.Body, rc: rc, idle: g.limits.BodyIdle, end: start.Add(bound)}
	// At the end of the drain the request's context ends, and a body still
	// being read stops being waited for, so the handler answers at once.
	stop := context.AfterFunc(g.drain, func() {
		cancel(errDrained)
		body.abort()
	})
	defer stop()
	r = r.WithContext(ctx)
	r.Body = body
	if streams(r) {
		// A followed log lasts as long as its client wants it; the
		// drain ends it (Gateway.EndStreams).
		g.next.ServeHTTP(w, r)
		return
	}
	g.next.ServeHTTP(&boundedWriter{ResponseWriter: w, rc: rc, bound: bound + g.limits.WriteExtra}, r)
	if r.ContentLength != 0 {
		body.leftUnread()
	}
}

// streams is a request whose answer is a stream with no natural end.
func streams(r *http.Request) bool {
	return r.URL.Path == "/system/logs" && r.URL.Query().Get("follow") == "true"
}

// end answers every open request now (503 or 504, drainFailure) and
// waits, until ctx ends, for their handlers to return.
func (g *guard) end(ctx context.Context) error {
	g.abort(errDrained)
	done := make(chan struct{})
	go func() { g.active.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// endExchanges ends every exchange with an instance still going, so that
// their handlers answer (drainAnswer); the instances are stopped next.
func (g *Gateway) endExchanges() { g.stopAbort() }

// endAborted ends the lease of an exchange the drain ended (soft is when
// its function's timeout passes). When the instances outlive the gateway
// (KeepsInstances) the instance may still be running it, and another
// replica would be granted the slot once this one lets go: the slot stays
// busy until the instance must have finished, soft plus HungGrace, or a
// second signal (waitHeld).
func (g *Gateway) endAborted(lease *dispatch.Lease, soft time.Time) {
	if !g.cfg.KeepsInstances {
		lease.Abandon()
		return
	}
	g.held.Add(1)
	go func() {
		defer g.held.Done()
		t := time.NewTimer(time.Until(soft.Add(g.cfg.HungGrace)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-g.letGo:
		}
		lease.Abandon()
	}()
}

// waitHeld waits until every slot endAborted keeps is free, or hurry ends:
// then it lets them go at once.
func (g *Gateway) waitHeld(hurry context.Context) {
	done := make(chan struct{})
	go func() { g.held.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-hurry.Done():
	}
	g.letGoOnce.Do(func() { close(g.letGo) })
	<-done
}

// functionOf is the function a path invokes.
func functionOf(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/function/")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "/")
	return name, name != ""
}

// boundedBody reads a request body with a deadline on each read: the idle
// gap from now, but never past the whole body's bound. Once the body is
// read to its end the deadline is lifted, since net/http's own read of the
// connection while the handler runs would take a deadline passing for a
// client gone.
type boundedBody struct {
	r    io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	end  time.Time

	mu      sync.Mutex
	done    bool
	aborted bool
}

func (b *boundedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return 0, io.EOF
	}
	if b.aborted {
		b.mu.Unlock()
		return 0, errDrained
	}
	d := time.Now().Add(b.idle)
	if d.After(b.end) {
		d = b.end
	}
	_ = b.rc.SetReadDeadline(d)
	b.mu.Unlock()
	n, err := b.r.Read(p)
	if err != nil {
		b.mu.Lock()
		if err == io.EOF {
			b.done = true
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		if b.aborted {
			err = errDrained
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.r.Close() }

// unreadGrace bounds how long net/http may read the rest of a body its
// handler answered without reading to its end (a 400, 401 or 404 answered
// early).
const unreadGrace = 500 * time.Millisecond

// leftUnread runs once the handler returned. net/http reads what is left
// of the body before it sends the answer, to keep the connection; a
// client that stalled mid-body would hold its answer until the idle bound
// (30 s by default). The rest of a body already sent is read within the
// grace and the connection kept; past it the answer goes out and the
// connection closes.
func (b *boundedBody) leftUnread() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done && !b.aborted {
		_ = b.rc.SetReadDeadline(time.Now().Add(unreadGrace))
	}
}

// abort makes a pending or later read return at once.
func (b *boundedBody) abort() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.aborted = true
	_ = b.rc.SetReadDeadline(time.Unix(1, 0))
}

// boundedWriter bounds writing the answer: from the first byte written,
// a client has the bound to take it all.
type boundedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	bound   time.Duration
	started bool
}

func (w *boundedWriter) arm() {
	if !w.started {
		w.started = true
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.bound))
	}
}

func (w *boundedWriter) WriteHeader(code int) { w.arm(); w.ResponseWriter.WriteHeader(code) }

func (w *boundedWriter) Write(p []byte) (int, error) { w.arm(); return w.ResponseWriter.Write(p) }

// Flush sends what is buffered (handlers that assert http.Flusher).
func (w *boundedWriter) Flush() { w.arm(); _ = w.rc.Flush() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *boundedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
