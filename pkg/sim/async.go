package sim

import (
	"fmt"

	"gantry.dev/gantry/pkg/policy"
)

// Async requests in the simulator: a share of the arrivals (Config.AsyncShare)
// carry the async deadline class, queue by the core's rule (policy.Enter)
// and are measured against the async deadline, as the live gateway's
// /async-function requests are.

// drawClass draws an arrival's deadline class.
func (e *engine) drawClass() policy.Class {
	if e.cfg.AsyncShare > 0 && e.classRng.Float64() < e.cfg.AsyncShare {
		return policy.Async
	}
	return policy.Sync
}

// classLatency is where a request of req's class is counted.
func (e *engine) classLatency(req *request) *latency {
	if req.class == policy.Async {
		return &e.async
	}
	return &e.app
}

// asyncResult summarises the async requests; nil when none arrived.
func (e *engine) asyncResult() *AsyncResult {
	if e.async.n+e.async.rejected == 0 {
		return nil
	}
	return &AsyncResult{Requests: e.async.n + e.async.rejected, Rejected: e.async.rejected,
		Deadline: e.cfg.AsyncDeadline, Latency: e.async.summary()}
}

// recordDone records a finished request's response time against its
// class's deadline.
func (e *engine) recordDone(req *request, resp int64) {
	e.classLatency(req).record(resp, req.queue, req.cold, req.execSum)
}

// maxAsyncDeadline bounds Config.AsyncDeadline, as a stack file's
// async_deadline is bounded.
const maxAsyncDeadline = 24 * 3600 * 1e9

func (c *Config) validateAsync() error {
	switch {
	case !(c.AsyncShare >= 0 && c.AsyncShare <= 1):
		return fmt.Errorf("%w: async share %v must be in [0, 1]", ErrBadConfig, c.AsyncShare)
	case c.AsyncDeadline < c.App.SLO || c.AsyncDeadline > maxAsyncDeadline:
		return fmt.Errorf("%w: async deadline %v must be in [the app SLO %v, 24h]", ErrBadConfig, c.AsyncDeadline, c.App.SLO)
	}
	return nil
}
