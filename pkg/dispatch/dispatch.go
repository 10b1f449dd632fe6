// Package dispatch is the live driver of the policy core. It owns each
// function's queue (in the order the policy chooses) and its instances'
// slots, hands requests to instances, feeds the policy real arrivals and
// executions, and applies the policy's decisions through a backend. Like
// Knative's activator throttler, it is kept apart from HTTP: handlers only
// Acquire a slot and Release it.
//
// One mutex guards the whole dispatcher. The policy is a single-threaded
// state machine, capacity is shared across functions, and every critical
// section is a few map and heap operations, so one lock is both the
// simplest and, measured at 5000 requests per second, not the bottleneck.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/policy"
)

var (
	// ErrNotFound: no such function or app.
	ErrNotFound = errors.New("not found")
	// ErrQueueFull: the function's queue is at its bound (HTTP 429).
	ErrQueueFull = errors.New("queue full")
	// ErrExists: a function or app of that name is already deployed.
	ErrExists = errors.New("already exists")
	// ErrInUse: the function is chained by an app, which must change
	// first (HTTP 409).
	ErrInUse = errors.New("in use")
	// ErrClosed: the dispatcher is shutting down (HTTP 503).
	ErrClosed = errors.New("shutting down")
)

// Config configures a dispatcher.
type Config struct {
	// Policy names the policy of the core that decides (default gantry).
	Policy string
	// Capacity bounds the instances of all functions together; 0 means
	// no bound.
	Capacity int
	// Tick is how often the autoscaler plans, Window the proactive
	// scaler's period, and IdleTimeout stops an instance idle that long
	// beyond the function's minimum; each defaults to the policy core's
	// (policy.DefaultTick, DefaultWindow, DefaultIdleTimeout), which the
	// simulator runs with too.
	Tick, Window, IdleTimeout time.Duration
	// SLOTarget is the share of requests that must meet the SLO, in
	// (0, 1), for apps whose functions declare none (stack slo_target);
	// 0 means policy.DefaultSLOTarget.
	SLOTarget float64
	// Now is the clock (default time.Now); tests step a fake one.
	Now func() time.Time
	// NewPolicy builds a group's policy (default policy.New); tests put a
	// recording policy in.
	NewPolicy func(name string, spec policy.Spec) (policy.Policy, error)
	// Check is an instance's health check after it failed a request: nil
	// means healthy (default backend.CheckHealth, an HTTP GET of
	// backend.HealthPath).
	Check func(ctx context.Context, inst backend.Instance) error
	// Peers are the other replicas of a scaled-out gateway (default
	// Solo: none).
	Peers  Peers
	Seed   uint64
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.Policy == "" {
		c.Policy = "gantry"
	}
	if c.Tick <= 0 {
		c.Tick = policy.DefaultTick
	}
	if c.Window <= 0 {
		c.Window = policy.DefaultWindow
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = policy.DefaultIdleTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Check == nil {
		c.Check = backend.CheckHealth
	}
	if c.NewPolicy == nil {
		c.NewPolicy = policy.New
	}
	if c.Peers == nil {
		c.Peers = Solo{}
	}
}

// Dispatcher is safe for concurrent use.
type Dispatcher struct {
	cfg   Config
	be    backend.Backend
	epoch time.Time
	// ctx ends with Close; it bounds health checks.
	ctx       context.Context
	endChecks context.CancelFunc
	checks    sync.WaitGroup
	// published is written under mu and read without it (catalog.go).
	published atomic.Pointer[catalog]

	// mu guards everything below.
	mu     mutex
	fns    map[string]*function
	apps   map[string]*group
	groups []*group
	// live counts instances of all functions, starting ones included,
	// against Capacity.
	live int
	// byID finds an instance from a backend event.
	byID map[string]*instance
	// early keeps, on a replica that does not decide, the instances its
	// backend reported for a function not registered yet, by function
	// and ID: Deploy reports the endpoints already there, and their
	// reports may arrive before register names the function, which then
	// adopts them (events.go, lockedKeepEarly).
	early  map[string]map[string]backend.Instance
	closed bool
	stats  Stats
	// seq numbers instance events in order (instance.created, freedSeq).
	seq uint64
	// viewBuf is lockedView's buffer for a queue in run order.
	viewBuf []policy.Queued[*call]

	// peers is called under mu (peers.go).
	peers Peers
}

// support is what the live dispatcher honours beyond what every driver
// must: nothing. It cannot know the future, and it plans at its ticks.
var support = policy.Support{}

// New returns a dispatcher that runs instances on be. It checks that the
// policy exists and that this driver can run it as it is meant to run
// (policy.Caps.Refuse): the clairvoyant ones are refused here.
func New(cfg Config, be backend.Backend) (*Dispatcher, error) {
	custom := cfg.NewPolicy != nil
	cfg.defaults()
	if !custom {
		if err := CheckPolicy(cfg.Policy); err != nil {
			return nil, err
		}
	}
	if cfg.Capacity < 0 {
		return nil, fmt.Errorf("capacity %d must not be negative", cfg.Capacity)
	}
	d := &Dispatcher{cfg: cfg, be: be, epoch: cfg.Now(), fns: map[string]*function{},
		apps: map[string]*group{}, byID: map[string]*instance{}, early: map[string]map[string]backend.Instance{}, peers: cfg.Peers}
	d.published.Store(&catalog{})
	d.ctx, d.endChecks = context.WithCancel(context.Background())
	be.Attach(events{d})
	d.peers.Attach(d)
	return d, nil
}

// CheckPolicy reports whether the live dispatcher runs the named policy:
// an unknown name is policy.ErrUnknownPolicy, one it cannot honour
// policy.ErrUnsupported with the reason. Command lines call it before
// anything starts.
func CheckPolicy(name string) error {
	if !slices.Contains(append(policy.Names(), policy.Ablations()...), name) {
		return fmt.Errorf("%w %q (known: %v)", policy.ErrUnknownPolicy, name, policy.Names())
	}
	c, err := policy.CapsFor(name)
	if err != nil {
		return err
	}
	return c.Refuse(name, support)
}

// Policy is the name of the policy deciding.
func (d *Dispatcher) Policy() string { return d.cfg.Policy }

// Tick is the autoscaler's period.
func (d *Dispatcher) Tick() time.Duration { return d.cfg.Tick }

// nanos maps a clock reading to the run queues' int64 time line.
func (d *Dispatcher) nanos(t time.Time) int64 { return int64(t.Sub(d.epoch)) }

// Close stops planning, fails what is still queued, and stops every
// instance. Call it after the HTTP server has drained.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.lockedAdvance(d.cfg.Now())
	for _, fn := range d.fns {
		d.lockedFailQueued(fn, ErrClosed)
	}
	d.mu.Unlock()
	d.endChecks()
	d.checks.Wait()
	return d.be.Close(ctx)
}
