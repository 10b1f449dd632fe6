package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"gantry.dev/gantry/pkg/callid"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// OutputSizeHeader is the response header an instance may set to give its
// output size in the next function's unit; without it the output size is
// the response body's length.
const OutputSizeHeader = "X-Output-Size"

// result is one function's answer.
type result struct {
	status int
	header http.Header
	body   []byte
	// outSize is the output size the next function of a chain receives.
	outSize float64
}

// failure is a request the gateway answers itself, with its reason.
type failure struct {
	status  int
	outcome string
	err     error
}

func (f *failure) Error() string { return f.err.Error() }

func (g *Gateway) invokeFunction(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	w.Header().Set(callid.Header, callid.Ensure(r.Header))
	decl, ok := g.Resolve(r.PathValue("name"))
	if !ok {
		g.fail(w, unknownName, &failure{http.StatusNotFound, "not_found",
			fmt.Errorf("function %q not found", stack.QualifiedRef(r.PathValue("name")))})
		return
	}
	name := decl.Qualified()
	g.metrics.forName(name).started().Inc()
	body, fail := g.readBody(w, r)
	if fail != nil {
		g.fail(w, name, fail)
		return
	}
	size, fail := inputSize(decl, r.Header, len(body))
	if fail != nil {
		g.fail(w, name, fail)
		return
	}
	fwd := forward{method: r.Method, path: "/" + r.PathValue("path"), query: r.URL.RawQuery, header: r.Header}
	answered := false
	early := func(f *failure) { answered = true; g.failNow(w, name, f) }
	res, fail := g.call(r.Context(), decl, size, due{at: arrival.Add(decl.SLO)}, body, fwd, early)
	if answered {
		return
	}
	if fail != nil {
		g.fail(w, name, fail)
		return
	}
	g.reply(w, name, res, time.Since(arrival), decl.SLO)
}

func (g *Gateway) invokeApp(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	w.Header().Set(callid.Header, callid.Ensure(r.Header))
	name := r.PathValue("name")
	app, ok := g.d.App(name)
	if !ok {
		g.fail(w, unknownName, &failure{http.StatusNotFound, "not_found", fmt.Errorf("app %q not found", name)})
		return
	}
	body, fail := g.readBody(w, r)
	if fail != nil {
		g.fail(w, name, fail)
		return
	}
	g.metrics.forName(name).started().Inc()
	header := r.Header
	var res *result
	answered := false
	for i, fnName := range app.Functions {
		decl, ok := g.d.Lookup(fnName)
		if !ok {
			g.fail(w, name, &failure{http.StatusServiceUnavailable, "not_found", fmt.Errorf("app %q: function %q was removed", name, fnName)})
			return
		}
		size := 0.0
		if i == 0 {
			size, fail = inputSize(decl, header, len(body))
		} else {
			size = res.outSize
		}
		if fail != nil {
			g.fail(w, decl.Qualified(), fail)
			return
		}
		fwd := forward{method: http.MethodPost, path: "/", header: header}
		early := func(f *failure) {
			answered = true
			w.Header().Set("X-Gantry-Failed-Function", fnName)
			g.failNow(w, decl.Qualified(), f)
		}
		res, fail = g.call(r.Context(), decl, size, due{at: arrival.Add(app.Budget[i])}, body, fwd, early)
		if answered {
			return
		}
		if fail != nil {
			w.Header().Set("X-Gantry-Failed-Function", fnName)
			g.fail(w, decl.Qualified(), fail)
			return
		}
		if res.status >= 300 {
			w.Header().Set("X-Gantry-Failed-Function", fnName)
			break
		}
		body, header = res.body, chainHeader(res, decl)
		header.Set(callid.Header, r.Header.Get(callid.Header))
	}
	g.reply(w, name, res, time.Since(arrival), app.Budget[len(app.Budget)-1])
}

// unknownName is the function_name label of requests for a name that is
// not deployed: a client choosing names must not grow the metrics without
// bound.
const unknownName = "_unknown"

// chainHeader is what the next function of a chain receives: the content
// type and the output size, as the size header a function may declare.
func chainHeader(res *result, _ stack.Function) http.Header {
	h := http.Header{}
	if ct := res.header.Get("Content-Type"); ct != "" {
		h.Set("Content-Type", ct)
	}
	h.Set("X-Input-Size", strconv.FormatFloat(res.outSize, 'g', -1, 64))
	return h
}

// exactRead is the largest declared body read into a buffer of exactly its
// size, allocated up front.
const exactRead = 64 << 10

// readBody reads the whole body within the limit. A small declared length
// is read into a buffer of exactly that size; a larger or unknown one
// grows as it comes.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *failure) {
	if r.ContentLength > g.cfg.MaxBody {
		return nil, &failure{http.StatusRequestEntityTooLarge, "too_large",
			fmt.Errorf("body of %d bytes is over the limit of %d", r.ContentLength, g.cfg.MaxBody)}
	}
	var body []byte
	var err error
	if r.ContentLength >= 0 && r.ContentLength <= exactRead {
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		// A large declared length is not allocated before its bytes come:
		// a client could otherwise make the gateway hold MaxBody for every
		// connection it opens and never send.
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBody))
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &failure{http.StatusRequestEntityTooLarge, "too_large", fmt.Errorf("body over the limit of %d bytes", g.cfg.MaxBody)}
		}
		if f := bodyFailure(err); f != nil {
			return nil, f
		}
		return nil, &failure{http.StatusBadRequest, "bad_request", fmt.Errorf("reading the body: %v", err)}
	}
	return body, nil
}

// inputSize is the request's input size: the declared header, or without
// it the body's length converted to the function's unit and clamped to
// its size range, as ../shared/conventions.md has it (a client that does
// not know the header still gets served, with the size the body gives; a
// 26-byte body is 26/1024 of a function declared in KB, not 26 KB).
func inputSize(decl stack.Function, h http.Header, bodyLen int) (float64, *failure) {
	v := ""
	if decl.SizeHeader != "" {
		v = h.Get(decl.SizeHeader)
	}
	if v == "" {
		return bodySize(decl, bodyLen), nil
	}
	size, err := strconv.ParseFloat(v, 64)
	why := ""
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(size):
		why = "is not a number (want a positive decimal such as 7.5, in the function's unit)"
	case size == 0:
		why = "is not positive (it is 0 as a 64-bit float)"
	case !(size > 0):
		why = "is not positive"
	case size > dispatch.MaxSize:
		why = fmt.Sprintf("is too large: an input size is at most %g", dispatch.MaxSize)
	}
	if why != "" {
		return 0, &failure{http.StatusBadRequest, "bad_request",
			fmt.Errorf("header %s=%q %s; the function's input sizes range over [%g, %g]", decl.SizeHeader, v, why, decl.MinSize, decl.MaxSize)}
	}
	return size, nil
}

// bodySize is the body's length in the function's unit, clamped to its
// size range (a declaration built without Defaults has none: then at
// least 1, the policy's sizes being positive).
func bodySize(decl stack.Function, bodyLen int) float64 {
	per := stack.UnitBytes(decl.SizeUnit)
	if per == 0 {
		per = 1 // Validate refuses such a unit; never divide by it
	}
	size := float64(bodyLen) / per
	if decl.MaxSize > 0 {
		return min(max(size, decl.MinSize), decl.MaxSize)
	}
	return max(size, 1)
}

// forward is what of the client's request reaches the instance.
type forward struct {
	method, path, query string
	header              http.Header
}

// call runs one function: acquire a slot, forward, release. A request an
// instance failed is retried once on another instance, only when it was
// never delivered (refused, or reset before a byte was written) or when
// the function is declared idempotent: otherwise the function may have
// run, and running it again is the client's call.
//
// early answers the client while the call goes on (a timeout: the slot
// stays busy until the instance's answer ends or it is deemed hung); the
// caller then answers nothing more.
func (g *Gateway) call(ctx context.Context, decl stack.Function, size float64, deadline due, body []byte, fwd forward, early func(*failure)) (*result, *failure) {
	for attempt := 0; ; attempt++ {
		lease, err := g.d.Acquire(ctx, dispatch.Request{Function: decl.Ref(), Size: size, Deadline: deadline.at,
			Class: deadline.class, Slack: deadline.slack})
		if err != nil {
			return nil, acquireFailure(ctx, err)
		}
		m := g.metrics.forName(decl.Qualified())
		m.queueWait().Observe(lease.Waited.Seconds())
		res, crashed, fail := g.execute(ctx, lease, body, fwd, early)
		if fail != nil {
			return nil, fail
		}
		if crashed == nil {
			return res, nil
		}
		delivered := !neverDelivered(crashed)
		switch {
		case attempt > 0:
			return nil, &failure{http.StatusBadGateway, "instance_error", fmt.Errorf("function %q: instance failed twice: %v", decl.Name, crashed)}
		case delivered && !decl.Idempotent:
			return nil, &failure{http.StatusBadGateway, "instance_error", fmt.Errorf(
				"function %q: instance %s failed after receiving the request, which may have run; not retried (the function is not declared idempotent): %v",
				decl.Name, lease.Instance.ID, crashed)}
		}
		m.retries().Inc()
		g.cfg.Logger.Warn("retrying on another instance", "function", decl.Name, callid.Header, fwd.header.Get(callid.Header),
			"instance", lease.Instance.ID, "delivered", delivered, "err", crashed)
	}
}

func acquireFailure(ctx context.Context, err error) *failure {
	if f := drainFailure(ctx, false); f != nil {
		return f
	}
	switch {
	case ctx.Err() != nil:
		return &failure{499, "canceled", err}
	case errors.Is(err, dispatch.ErrQueueFull):
		return &failure{http.StatusTooManyRequests, "queue_full", err}
	case errors.Is(err, dispatch.ErrNotFound):
		return &failure{http.StatusNotFound, "not_found", err}
	case errors.Is(err, dispatch.ErrClosed), errors.Is(err, dispatch.ErrRemoved):
		return &failure{http.StatusServiceUnavailable, "unavailable", err}
	case errors.Is(err, dispatch.ErrStartFailed):
		return &failure{http.StatusServiceUnavailable, "crash_loop", err}
	}
	return &failure{http.StatusBadRequest, "bad_request", err}
}

// execute forwards one request on a lease. failed is set when the
// instance did not answer and the caller may retry on another.
//
// The exchange is not tied to the client: one that goes away leaves its
// slot busy until the instance's answer ends (read and dropped), so an
// instance never runs more than its concurrency. At the function's
// timeout the client is answered 504 through early and the slot stays
// busy; an answer within HungGrace frees it, none marks the instance
// hung (Lease.Hung), to be replaced.
func (g *Gateway) execute(ctx context.Context, lease *dispatch.Lease, body []byte, fwd forward, early func(*failure)) (res *result, failed error, fail *failure) {
	start := time.Now()
	soft := start.Add(lease.Timeout)
	up := &upRequest{addr: lease.Instance.Addr, method: fwd.method, path: fwd.path, query: fwd.query,
		header: fwd.header, body: body}
	var timedOut *failure
	xctx, endX := context.WithCancel(g.abort)
	defer endX()
	stopDrain := func() bool { return false }
	late := func() {
		timedOut = &failure{http.StatusGatewayTimeout, "timeout", fmt.Errorf(
			"function %q did not answer within its timeout of %v; its instance may still be working on it", lease.Instance.Function, lease.Timeout)}
		lease.TimedOut()
		early(timedOut)
		// Answered already: a drain does not wait for the rest of the
		// exchange (before, it waited up to HungGrace for an instance
		// that had hung, once every client had its answer). Instances
		// that outlive this gateway are another replica's to judge.
		if !g.cfg.KeepsInstances {
			stopDrain = context.AfterFunc(g.draining, endX)
		}
	}
	resp, err := g.up.doLate(xctx, up, soft, soft.Add(g.cfg.HungGrace), g.cfg.MaxBody, late)
	stopDrain()
	exec := time.Since(start)
	switch {
	case timedOut != nil:
		return nil, nil, g.endLate(lease, err, timedOut, soft, xctx.Err() != nil)
	case err == nil:
		res = &result{status: resp.status, header: resp.header, body: resp.body, outSize: outputSize(resp)}
		lease.Release(exec, res.outSize)
		if ctx.Err() != nil {
			return nil, nil, &failure{499, "canceled", ctx.Err()} // answered to nobody
		}
		return res, nil, nil
	case g.abort.Err() != nil:
		g.endAborted(lease, soft)
		// Only a shutdown aborts: the drain's answer (guard.go).
		var dial *errDial
		return nil, nil, drainAnswer(!errors.As(err, &dial))
	case errors.Is(err, errTooLarge):
		lease.Release(exec, float64(g.cfg.MaxBody))
		return nil, nil, &failure{http.StatusBadGateway, "too_large", err}
	}
	// Refused, reset or closed: the instance is out of service until its
	// health check says whether it is gone or was only busy for a moment.
	err = g.limits.explain(lease.Instance.ID, err) // an OOM kill says so (limits.go)
	lease.Failed(err)
	return nil, err, nil
}

// endLate ends the lease of a request already answered 504: an answer
// within the grace period frees the slot; none (the hard deadline) means
// the instance hung; a shutdown or a drain (aborted) ends it as
// endAborted does.
func (g *Gateway) endLate(lease *dispatch.Lease, err error, timedOut *failure, soft time.Time, aborted bool) *failure {
	switch {
	case aborted && err != nil && g.abort.Err() == nil:
		// The drain ended it: the instance, still on it past its
		// timeout, is taken out of rotation (the drain may still send
		// queued requests to the others) and stopped once its other
		// requests end; freeing the slot would let the drain send it
		// more than its concurrency.
		lease.Hung(fmt.Errorf("no answer %v after the function's timeout of %v, when the gateway began to drain", time.Since(soft).Round(time.Millisecond), lease.Timeout))
	case aborted && err != nil:
		g.endAborted(lease, soft)
	case err == nil, errors.Is(err, errTooLarge):
		lease.Abandon()
	case errors.Is(err, os.ErrDeadlineExceeded):
		lease.Hung(fmt.Errorf("no answer within %v after the function's timeout of %v", g.cfg.HungGrace, lease.Timeout))
	default:
		lease.Failed(err)
	}
	return timedOut
}

// retryAfter is when a refused client may try again: a second past a
// full queue, the rest of the back-off of a crash-looping function.
func retryAfter(f *failure) (time.Duration, bool) {
	if loop := (*dispatch.CrashLoopError)(nil); errors.As(f.err, &loop) {
		return max(time.Second, loop.RetryAfter), true
	}
	return time.Second, f.status == http.StatusTooManyRequests
}

var errTooLarge = errors.New("response body over the limit")

// outputSize is the size the next function of a chain receives: the
// instance's X-Output-Size, else the body's length.
func outputSize(resp *upResponse) float64 {
	size := float64(max(1, len(resp.body)))
	if v := resp.header.Get(OutputSizeHeader); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 && s <= dispatch.MaxSize {
			size = s
		}
	}
	return size
}

// hopHeaders are per-connection and never forwarded (RFC 9110 7.6.1).
var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		if !hopHeaders[k] {
			dst[k] = append(dst[k][:0:0], vs...)
		}
	}
}

func (g *Gateway) reply(w http.ResponseWriter, name string, res *result, took, slo time.Duration) {
	id := w.Header().Get(callid.Header)
	copyHeader(w.Header(), res.header)
	w.Header().Set(callid.Header, id) // the call's, whatever the instance says
	w.Header().Set("X-Duration-Seconds", strconv.FormatFloat(took.Seconds(), 'f', 6, 64))
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)
	g.metrics.forName(name).observe(res.status, took, slo)
}

// failNow answers the client at once while the handler goes on (the slot
// follows the instance): a complete response, its length declared and the
// connection closed after it, so that the client neither waits for the
// handler's end nor queues its next request behind it.
func (g *Gateway) failNow(w http.ResponseWriter, name string, f *failure) {
	g.count(w, name, f)
	msg := f.err.Error() + "\n"
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(msg)))
	h.Set("Connection", "close")
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, msg)
	_ = http.NewResponseController(w).Flush()
}

func (g *Gateway) fail(w http.ResponseWriter, name string, f *failure) {
	g.count(w, name, f)
	if f.status == 499 {
		return // nobody is listening
	}
	http.Error(w, f.err.Error(), f.status)
}

// count counts and logs a request the gateway answers itself.
func (g *Gateway) count(w http.ResponseWriter, name string, f *failure) {
	failHeaders(w.Header(), f)
	if wait, ok := retryAfter(f); ok {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
	}
	m := g.metrics.forName(name)
	m.outcome(f.outcome).Inc()
	m.refused(f.status)
	if f.status >= 500 {
		g.cfg.Logger.Warn("request failed", "function", name, callid.Header, w.Header().Get(callid.Header),
			"status", f.status, "reason", f.outcome, "err", f.err)
	}
}
