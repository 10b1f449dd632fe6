package loadgen

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// abortGrace is how long aborted requests get to return before the run
// stops waiting for them; the HTTP client returns promptly on cancellation,
// so only a Payload that ignores everything could take longer.
const abortGrace = 400 * time.Millisecond

// runner carries one run's state.
type runner struct {
	cfg        Config
	client     *http.Client
	ownsClient bool
	sched      *schedule
	pool       *pool
	col        *collector
	start      time.Time

	// reqCtx parents every request; abort cancels it once the drain bound
	// runs out. It is separate from the caller's ctx so that cancelling the
	// run stops new sends without killing requests that may still answer.
	reqCtx  context.Context
	abort   context.CancelFunc
	aborted atomic.Bool

	inFlight atomic.Int64
	sent     atomic.Int64
	wg       sync.WaitGroup
}

func newRunner(cfg Config, p *pool) *runner {
	r := &runner{cfg: cfg, client: cfg.Client, sched: newSchedule(cfg), pool: p, col: newCollector(cfg)}
	if r.client == nil {
		r.client, r.ownsClient = NewClient(cfg.MaxInFlight), true
	}
	r.reqCtx, r.abort = context.WithCancel(context.Background())
	return r
}

// run sends the schedule, drains, and collects the result.
func (r *runner) run(ctx context.Context) *Result {
	defer r.abort()
	r.start = time.Now()
	stopProgress := r.startProgress()
	r.dispatchAll(ctx)
	r.drain(ctx)
	stopProgress()
	r.col.close(r.sent.Load())
	if r.ownsClient {
		r.client.CloseIdleConnections()
	}
	res := r.col.result()
	res.Start = r.start
	res.Duration = time.Since(r.start)
	res.Interrupted = ctx.Err() != nil
	if res.Duration > 0 {
		res.Throughput = float64(res.OK) / res.Duration.Seconds()
	}
	r.reportProgress()
	return res
}

// dispatchAll sends every arrival at its intended time until the schedule
// ends or ctx is cancelled. One goroutine paces everything: it never waits
// for a response, so a slow server cannot slow the arrivals down.
func (r *runner) dispatchAll(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		a, ok := r.sched.next()
		if !ok {
			break
		}
		if !r.waitUntil(ctx, timer, a.offset) {
			return
		}
		r.dispatch(a)
	}
	// Hold the run open until the trace's last second is over, so that a
	// trace that ends quietly still lasts as long as it says.
	r.waitUntil(ctx, timer, r.sched.end())
}

// waitUntil sleeps until offset after the start. It returns false if ctx
// was cancelled, checked even when the dispatcher is late and need not
// sleep, so that a backlog cannot delay the stop.
func (r *runner) waitUntil(ctx context.Context, timer *time.Timer, offset time.Duration) bool {
	d := time.Until(r.start.Add(offset))
	if d <= 0 {
		select {
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	timer.Reset(d)
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// dispatch starts one request, or counts it as client_overload when
// MaxInFlight requests are already out. Either way it is counted as sent.
func (r *runner) dispatch(a arrival) {
	r.sent.Add(1)
	if r.inFlight.Add(1) > int64(r.cfg.MaxInFlight) {
		r.inFlight.Add(-1)
		r.col.add(Sample{Offset: a.offset, Size: a.size, Kind: KindClientOverload})
		return
	}
	r.wg.Add(1)
	go r.send(a)
}

func (r *runner) send(a arrival) {
	defer r.wg.Done()
	s := r.do(a)
	r.inFlight.Add(-1)
	r.col.add(s)
}

// do performs one request and measures it from its intended send time.
func (r *runner) do(a arrival) Sample {
	s := Sample{Offset: a.offset, Size: a.size}
	body, header, err := r.payload(a)
	if err != nil {
		s.Kind = KindPayload
		return s
	}
	ctx, cancel := context.WithTimeout(r.reqCtx, r.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.cfg.Method, r.cfg.URL, bytes.NewReader(body))
	if err != nil {
		s.Kind = KindOther
		return s
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := r.client.Do(req)
	if err == nil {
		s.Status = resp.StatusCode
		// The response counts once its body has arrived; reading it to
		// the end also lets the connection be reused.
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	s.Latency = time.Since(r.start.Add(a.offset))
	s.Measured, s.Kind = r.outcome(s.Status, err)
	return s
}

// outcome classifies a finished request and says whether its latency means
// anything: an aborted request's latency is only the drain bound.
func (r *runner) outcome(status int, err error) (measured bool, kind string) {
	if err == nil {
		return true, statusKind(status)
	}
	kind = errorKind(err, r.aborted.Load())
	return kind != KindCanceled, kind
}

// payload returns the request's body and headers, from the pool or freshly
// built with an RNG seeded for this request alone.
func (r *runner) payload(a arrival) ([]byte, http.Header, error) {
	if r.pool != nil {
		b := r.pool.pick(a.size, a.seed)
		return b.body, b.header, nil
	}
	rng := rand.New(rand.NewPCG(a.seed, streamPayloads))
	return r.cfg.Payload(a.size, rng)
}

// drain waits for the requests in flight. After a normal end each request
// is bounded by its own timeout; after cancellation the wait is cut to
// cfg.Drain, then the rest are aborted and given abortGrace to return.
func (r *runner) drain(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	full := time.NewTimer(r.cfg.Timeout + abortGrace)
	defer full.Stop()
	select {
	case <-done:
		return
	case <-full.C:
	case <-ctx.Done():
		if waitFor(done, r.cfg.Drain) {
			return
		}
	}
	r.aborted.Store(true)
	r.abort()
	waitFor(done, abortGrace)
}

// waitFor reports whether done closed within d.
func waitFor(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// startProgress calls cfg.Progress every cfg.ProgressEvery from one
// goroutine; the returned func stops it and waits for it to exit, so that
// the final report never races a periodic one.
func (r *runner) startProgress() (stop func()) {
	if r.cfg.Progress == nil || r.cfg.ProgressEvery == 0 {
		return func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(r.cfg.ProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				r.reportProgress()
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
	}
}

func (r *runner) reportProgress() {
	if r.cfg.Progress != nil {
		r.cfg.Progress(r.sent.Load(), r.col.done.Load(), time.Since(r.start), r.sched.end())
	}
}
