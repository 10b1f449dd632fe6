package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"gantry.dev/gantry/pkg/async"
	"gantry.dev/gantry/pkg/callid"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

// Async invocations (OpenFaaS's /async-function): the route publishes a
// job to the queue (pkg/async) and answers 202 with its X-Call-Id once
// JetStream has stored it; the queue's workers run it later through
// Invoke, on the same dispatcher, with the function's async deadline.

// due is when a call must finish, and its deadline class.
type due struct {
	at    time.Time
	class policy.Class
	// slack is an async call's deadline minus a synchronous one's.
	slack time.Duration
}

func (g *Gateway) asyncRoutes() {
	if g.cfg.Async != nil {
		g.asyncM = async.NewMetrics(g.cfg.Registry)
	}
	// Any method, so another than POST gets its 405 here rather than the
	// catch-all's 404.
	g.mux.HandleFunc("/async-function/{name}", g.invokeAsync)
	g.mux.HandleFunc("/async-function/{name}/{path...}", g.invokeAsync)
}

// invokeAsync accepts an async invocation: 202 with X-Call-Id once the
// job is stored, 429 past the queue's bound. What can be checked now is
// checked now (the function exists, the callback URL, the body's size
// and input size), so a bad request gets its 4xx at once, not in a
// callback.
func (g *Gateway) invokeAsync(w http.ResponseWriter, r *http.Request) {
	accepted := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		g.fail(w, unknownName, &failure{http.StatusMethodNotAllowed, "bad_request", fmt.Errorf("async invocations are POST, not %s", r.Method)})
		return
	}
	if g.cfg.Async == nil {
		g.fail(w, unknownName, &failure{http.StatusServiceUnavailable, "unavailable", errors.New("async invocations are not enabled on this gateway")})
		return
	}
	decl, ok := g.Resolve(r.PathValue("name"))
	if !ok {
		g.fail(w, unknownName, &failure{http.StatusNotFound, "not_found",
			fmt.Errorf("function %q not found", stack.QualifiedRef(r.PathValue("name")))})
		return
	}
	name := decl.Qualified()
	cb := r.Header.Get(async.CallbackHeader)
	if cb != "" {
		if err := async.CheckCallback(cb); err != nil {
			g.fail(w, name, &failure{http.StatusBadRequest, "bad_request", err})
			return
		}
	}
	body, fail := g.readAsyncBody(w, r)
	if fail == nil {
		_, fail = inputSize(decl, r.Header, len(body))
	}
	if fail != nil {
		g.fail(w, name, fail)
		return
	}
	// An async client's own X-Call-Id is what makes its retry safe (a job
	// stored already is stored once): one that would be replaced, or sent
	// twice, is refused rather than swapped for a fresh one unseen.
	if ids := r.Header.Values(callid.Header); len(ids) > 1 || len(ids) == 1 && !callid.Valid(ids[0]) {
		g.fail(w, name, &failure{http.StatusBadRequest, "bad_request", fmt.Errorf(
			"%s must be given once, as 1 to %d printable ASCII characters without spaces (or left out, and the gateway names the call)",
			callid.Header, callid.MaxLen)})
		return
	}
	id := callid.Ensure(r.Header)
	// Every answer from here names the call: a client told 503 retries
	// with it, and a job stored already is stored once.
	w.Header().Set(callid.Header, id)
	j := &async.Job{CallID: id, Function: decl.Name, Namespace: decl.NamespaceOrDefault(), Criticality: decl.Criticality,
		Method: r.Method, Path: "/" + r.PathValue("path"), Query: r.URL.RawQuery, Header: r.Header,
		Body: body, CallbackURL: cb, Accepted: accepted}
	if fail := g.publish(r.Context(), j); fail != nil {
		g.fail(w, name, fail)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// readAsyncBody reads the body within the smaller of the gateway's and
// the queue's limits.
func (g *Gateway) readAsyncBody(w http.ResponseWriter, r *http.Request) ([]byte, *failure) {
	limit := min(g.cfg.MaxBody, g.cfg.Async.MaxPayload())
	if r.ContentLength > limit {
		return nil, &failure{http.StatusRequestEntityTooLarge, "too_large",
			fmt.Errorf("body of %d bytes is over the async limit of %d", r.ContentLength, limit)}
	}
	body, fail := g.readBody(w, r)
	if fail == nil && int64(len(body)) > limit {
		fail = &failure{http.StatusRequestEntityTooLarge, "too_large", fmt.Errorf("body over the async limit of %d bytes", limit)}
	}
	return body, fail
}

// publishTimeout bounds the wait for JetStream's acknowledgement.
const publishTimeout = 10 * time.Second

func (g *Gateway) publish(ctx context.Context, j *async.Job) *failure {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	err := g.cfg.Async.Publish(ctx, j)
	switch {
	case err == nil:
		g.asyncM.Published()
		return nil
	case errors.Is(err, async.ErrFull):
		g.asyncM.Refused("full")
		return &failure{http.StatusTooManyRequests, "queue_full", fmt.Errorf("the async queue is full: %v", err)}
	case errors.Is(err, async.ErrTooLarge):
		g.asyncM.Refused("too_large")
		return &failure{http.StatusRequestEntityTooLarge, "too_large", err}
	}
	g.asyncM.Refused("unavailable")
	if errors.Is(err, async.ErrUnconfirmed) {
		return &failure{http.StatusServiceUnavailable, "unavailable", fmt.Errorf("the async queue did not confirm the request, "+
			"which may be stored and run: retry with the same %s within 2 minutes and it is stored once: %v", callid.Header, err)}
	}
	return &failure{http.StatusServiceUnavailable, "unavailable", fmt.Errorf("the async queue did not store the request: %v", err)}
}

// AsyncDue is when an async call accepted at accepted must finish at a
// function, with its slack over a synchronous call (policy.Enter): the
// function's async deadline from its acceptance, so time spent queued,
// or in a gateway that crashed, counts.
func AsyncDue(decl stack.Function, accepted time.Time) (at time.Time, slack time.Duration) {
	budget := policy.AsyncBudget(decl.SLO, decl.SLO, decl.AsyncDeadline)
	return accepted.Add(budget), budget - decl.SLO
}

// Invoke runs an async job through the dispatcher (async.Invoker).
func (g *Gateway) Invoke(ctx context.Context, j *async.Job) async.Result {
	decl, ok := g.d.Lookup(stack.Ref(j.Function, j.Namespace))
	if !ok {
		return g.asyncAnswer(j, &failure{http.StatusNotFound, "not_found", fmt.Errorf("function %q not found", j.Function)})
	}
	size, fail := inputSize(decl, j.Header, len(j.Body))
	if fail != nil {
		return g.asyncAnswer(j, fail)
	}
	at, slack := AsyncDue(decl, j.Accepted)
	fwd := forward{method: j.Method, path: j.Path, query: j.Query, header: j.Header}
	var timedOut *failure // answered at the function's timeout; the slot stays busy until the instance is done
	early := func(f *failure) { timedOut = f }
	res, fail := g.call(ctx, decl, size, due{at: at, class: policy.Async, slack: slack}, j.Body, fwd, early)
	if fail == nil && timedOut != nil {
		fail = timedOut
	}
	if fail != nil {
		if ctx.Err() != nil {
			return async.Result{Retry: true}
		}
		if retryLater(fail) {
			// "Not now" is worth waiting on only until the deadline: a
			// function that stays broken must not have its jobs handed
			// back every second for ever with no word to the client.
			if time.Now().Before(at) {
				return async.Result{Retry: true}
			}
			fail = &failure{fail.status, fail.outcome, fmt.Errorf(
				"given up at its async deadline of %v after the 202: %v", at.Sub(j.Accepted), fail.err)}
		}
		return g.asyncAnswer(j, fail)
	}
	took := time.Since(j.Accepted)
	g.metrics.forName(decl.Qualified()).observe(res.status, took, decl.AsyncDeadline)
	return async.Result{Status: res.status, Header: res.header, Body: res.body, Took: took}
}

// retryLater reports a failure that says "not now" rather than "never":
// the function's queue was full, it is crash-looping, or the gateway is
// stopping. The job goes back to the queue until its async deadline.
func retryLater(f *failure) bool {
	return f.status == http.StatusTooManyRequests || f.status == http.StatusServiceUnavailable || f.status == 499
}

// asyncAnswer is the result of a job the gateway answered itself.
func (g *Gateway) asyncAnswer(j *async.Job, f *failure) async.Result {
	m := g.metrics.forName(stack.Qualified(j.Function, j.Namespace))
	m.outcome(f.outcome).Inc()
	m.answered.Add(1)
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return async.Result{Status: f.status, Header: h, Body: []byte(f.err.Error() + "\n"), Took: time.Since(j.Accepted)}
}

// openAsync opens the queue of a server configured with one: the embedded
// server stores under the state folder's jetstream/ (a temporary folder
// without a state folder).
func openAsync(ctx context.Context, cfg ServerConfig) (*async.Queue, error) {
	if cfg.Async == nil {
		return nil, nil
	}
	ac := *cfg.Async
	if ac.URL == "" && cfg.State != nil {
		ac.StoreDir = cfg.State.Sub(statedir.JetStream)
	}
	q, err := async.Open(ctx, ac)
	if err != nil {
		return nil, fmt.Errorf("async queue: %w", err)
	}
	return q, nil
}

func closeAsync(q *async.Queue) {
	if q != nil {
		q.Close()
	}
}

// startWorkers starts running queued jobs, once the functions are loaded.
func (s *Server) startWorkers(logger *slog.Logger) {
	if s.queue != nil {
		s.workers = async.StartWorkers(s.queue, s.G, s.G.asyncM, logger)
	}
}

// stopWorkers lets running jobs finish until ctx ends; the rest go back to
// the queue.
func (s *Server) stopWorkers(ctx context.Context) {
	if s.workers != nil {
		s.workers.Stop(ctx)
	}
}
