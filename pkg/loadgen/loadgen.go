// Package loadgen is an open-loop HTTP load generator. It replays a trace's
// per-second arrival rates as Poisson arrivals against any URL (Gantry's or
// OpenFaaS's gateway), drawing each request's input size from a workload
// distribution and turning it into a body with a pluggable Payload.
//
// Open loop means arrivals never wait for responses: each request has an
// intended send time fixed by the schedule, and its latency is measured from
// that time, so a stalled server or a late client shows up in the latencies
// instead of silently thinning the load (no coordinated omission). In-flight
// requests are bounded; an arrival that finds the bound reached is counted as
// a client_overload error, never dropped.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// Bounds on a run, checked before anything is allocated so that a typo in a
// flag cannot exhaust memory or run for days.
const (
	// MaxRequests caps the trace's expected number of requests.
	MaxRequests = 10_000_000
	// MaxDuration caps the trace's length; the per-second timeline is
	// allocated up front from it.
	MaxDuration = 24 * time.Hour
	// MaxInFlightLimit caps Config.MaxInFlight: each in-flight request is a
	// goroutine and usually a connection.
	MaxInFlightLimit = 1_000_000
	// MaxTimeout caps the per-request timeout.
	MaxTimeout = 10 * time.Minute
	// MaxSLO caps the SLO, which also sizes the latency histogram's range.
	MaxSLO = time.Hour
)

// Defaults for the zero values of Config.
const (
	DefaultMaxInFlight = 10_000
	DefaultTimeout     = 30 * time.Second
	// DefaultDrain is how long a cancelled run waits for in-flight requests
	// before aborting them: with abortGrace under a second in all, so that
	// gantry load stops within a second of SIGINT or SIGTERM.
	DefaultDrain         = 500 * time.Millisecond
	DefaultProgressEvery = 250 * time.Millisecond
)

// ErrBadConfig is returned by Validate and Run for a configuration no run
// can use; the message says which field and why.
var ErrBadConfig = errors.New("bad load configuration")

// Config describes one load run.
type Config struct {
	// URL is the full target, e.g. http://127.0.0.1:8080/function/resize.
	URL string
	// Method is the HTTP method; empty means POST.
	Method string
	// Trace gives the expected arrivals in each second.
	Trace trace.Trace
	// Dist draws input sizes from [MinSize, MaxSize]; nil means uniform.
	Dist workload.Distribution
	// MinSize and MaxSize bound the input size; both zero means 1.
	MinSize, MaxSize float64
	// Payload turns a size into a request body and headers; nil means Header().
	Payload Payload
	// Pool, when positive, pre-generates that many payloads for each of
	// Buckets size buckets before the run, for payloads too expensive to
	// build per request. Zero builds each body in its request's goroutine,
	// and the building time then counts in that request's latency.
	Pool int
	// Buckets is the number of size buckets of the pool; 0 means DefaultBuckets.
	Buckets int
	// Seed fixes the arrivals, sizes and payloads: the same seed and trace
	// give the same schedule.
	Seed uint64
	// MaxInFlight bounds concurrent requests; 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Timeout bounds each request from when it is sent; 0 means DefaultTimeout.
	Timeout time.Duration
	// Drain bounds the wait for in-flight requests after ctx is cancelled;
	// 0 means DefaultDrain.
	Drain time.Duration
	// SLO is the latency target for SLOCompliance; required.
	SLO time.Duration
	// Client sends the requests; nil means NewClient(MaxInFlight).
	Client *http.Client
	// Progress, if set, is called from one goroutine every ProgressEvery and
	// once at the end: requests sent and done so far, time since the start,
	// and the trace's length.
	Progress      func(sent, done int64, elapsed, total time.Duration)
	ProgressEvery time.Duration
	// OnSample, if set, receives every request's outcome, one call at a
	// time; it must be quick because it runs under the collector's lock.
	OnSample func(Sample)
}

// withDefaults fills the zero values.
func (c Config) withDefaults() Config {
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	if c.MinSize == 0 && c.MaxSize == 0 {
		c.MinSize, c.MaxSize = 1, 1
	}
	if c.Payload == nil {
		c.Payload = Header()
	}
	if c.Buckets == 0 {
		c.Buckets = DefaultBuckets
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	return c
}

// Validate reports whether Run would accept c, after its defaults are
// filled. Every error wraps ErrBadConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, check := range []func() error{c.checkTarget, c.checkTrace, c.checkSizes, c.checkLimits, c.checkPool} {
		if err := check(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	return nil
}

func (c Config) checkTarget() error {
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("URL %q: %w", c.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("URL %q must be http:// or https:// with a host", c.URL)
	}
	return nil
}

func (c Config) checkTrace() error {
	if err := c.Trace.Validate(); err != nil {
		return err
	}
	if c.Trace.Duration() > MaxDuration {
		return fmt.Errorf("trace lasts %v, more than the %v limit", c.Trace.Duration(), MaxDuration)
	}
	if total := c.Trace.Total(); total > MaxRequests {
		return fmt.Errorf("trace expects %.0f requests, more than the %d limit", total, MaxRequests)
	}
	return nil
}

func (c Config) checkSizes() error {
	if !positive(c.MinSize) || !positive(c.MaxSize) || c.MinSize > c.MaxSize {
		return fmt.Errorf("input sizes must be positive with min <= max, got %v and %v", c.MinSize, c.MaxSize)
	}
	return nil
}

func (c Config) checkLimits() error {
	switch {
	case c.MaxInFlight < 1 || c.MaxInFlight > MaxInFlightLimit:
		return fmt.Errorf("max in-flight must be in [1, %d], got %d", MaxInFlightLimit, c.MaxInFlight)
	case c.Timeout <= 0 || c.Timeout > MaxTimeout:
		return fmt.Errorf("timeout must be in (0, %v], got %v", MaxTimeout, c.Timeout)
	case c.Drain < 0 || c.Drain > MaxTimeout:
		return fmt.Errorf("drain must be in [0, %v], got %v", MaxTimeout, c.Drain)
	case c.SLO <= 0 || c.SLO > MaxSLO:
		return fmt.Errorf("SLO must be in (0, %v], got %v", MaxSLO, c.SLO)
	case c.ProgressEvery < 0:
		return fmt.Errorf("progress interval must not be negative, got %v", c.ProgressEvery)
	}
	return nil
}

func (c Config) checkPool() error {
	switch {
	case c.Pool < 0 || c.Buckets < 1:
		return fmt.Errorf("pool and buckets must be positive, got %d and %d", c.Pool, c.Buckets)
	case c.Pool > 0 && (c.Pool > MaxPoolPayloads || c.Buckets > MaxPoolPayloads || c.Pool*c.Buckets > MaxPoolPayloads):
		// Each factor is bounded first so that the product cannot overflow.
		return fmt.Errorf("pool of %d payloads in %d buckets exceeds %d payloads", c.Pool, c.Buckets, MaxPoolPayloads)
	}
	return nil
}

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// Run replays cfg.Trace against cfg.URL and returns what it measured. When
// ctx is cancelled it stops sending at once, waits up to cfg.Drain for the
// requests in flight, aborts the rest (kind canceled), and returns the
// partial result with Interrupted set and a nil error. Errors are for
// configurations that cannot run (ErrBadConfig) or payloads that cannot be
// pre-generated.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pool, err := newPool(cfg)
	if err != nil {
		return nil, err
	}
	r := newRunner(cfg, pool)
	return r.run(ctx), nil
}
