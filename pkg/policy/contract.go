package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The driver contract. A policy decides; a driver (the simulator, the live
// dispatcher) keeps queues and instances and carries the decisions out.
// Everything a driver must do for a policy to run as it was designed, and
// the same way under every driver, is here: the capabilities a policy has
// (Caps), and the rules of driving it (Contract and the functions of
// rules.go). pkg/policy/policytest holds the scripts that prove each
// driver follows them.

// ErrUnsupported refuses a policy whose capabilities a driver cannot
// honour. A driver returns it at start, never runs something else under
// the policy's name.
var ErrUnsupported = errors.New("policy not supported by this driver")

// Caps are a policy's capabilities beyond the Policy interface: each one
// asks something of the driver.
type Caps struct {
	// Estimates: every request gets Estimate when it enters a queue (the
	// run order or the detailed view reads it).
	Estimates bool
	// Detailed: Plan reads View.Queue, View.Running and View.Free.
	Detailed bool
	// Dedicated: a request that finds no free instance gets a new
	// instance of its own and waits for that one, never queueing behind
	// another request (Atoll, commercial platforms).
	Dedicated bool
	// Instances fixes which idle instance takes a request and how long an
	// idle instance lives; the zero value is the contract's default
	// (TakesBefore, the idle timeout).
	Instances Instances
	// ColdStart: the policy plans new instances with the measured cold
	// start (SetColdStart).
	ColdStart bool
	// LookAhead: a request arriving at the head of a chain runs the
	// Look-Ahead Scaler at once (LookAhead), not at the next tick.
	LookAhead bool
	// Wakes: Plan also runs at instants the policy picks (Waker).
	Wakes bool
	// Clairvoyant: the policy reads Spec.Truth, the future load and the
	// true execution times, which only a simulator knows.
	Clairvoyant bool
	// Refusals: the driver tells the policy of every request refused at
	// a full queue (Contract.Refused), so that the demand it sizes for
	// includes what the queue turned away.
	Refusals bool
	// Outcomes: the driver tells the policy how every request left each
	// function, late or not (Contract.Finished), and of every refusal
	// (miss_budget.go).
	Outcomes bool
}

// Support is what a driver can do beyond what every driver must (every
// capability not named here).
type Support struct {
	Clairvoyant bool
	Wakes       bool
}

// Refuse returns ErrUnsupported, saying why, when a driver with support s
// cannot run a policy with these capabilities.
func (c Caps) Refuse(name string, s Support) error {
	var missing []string
	if c.Clairvoyant && !s.Clairvoyant {
		missing = append(missing, "it reads the future load and true execution times (Spec.Truth), which only the simulator knows")
	}
	if c.Wakes && !s.Wakes {
		missing = append(missing, "it plans at instants of its own choosing")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %q: %s", ErrUnsupported, name, strings.Join(missing, "; "))
}

// caps of the policies built from parts.
func (p parts) caps() Caps {
	c := Caps{
		Detailed:    p.react == reactOverload,
		Dedicated:   p.react == reactPerRequest,
		ColdStart:   true,
		LookAhead:   p.lookAhead && p.react == reactOverload,
		Clairvoyant: p.truth,
		Refusals:    p.countRefused,
		Outcomes:    p.missBudget,
	}
	c.Estimates = p.order != FIFO || c.Detailed
	if p.instances != nil {
		c.Instances = *p.instances
	}
	return c
}

var (
	knativeCaps = Caps{}
	oracleCaps  = Caps{Estimates: true, Wakes: true, Clairvoyant: true}
)

// CapsFor returns the capabilities of a named policy or ablation without
// building it, so a driver can refuse a policy before it has a Spec.
func CapsFor(name string) (Caps, error) {
	switch name {
	case "oracle":
		return oracleCaps, nil
	case "knative":
		return knativeCaps, nil
	}
	p, ok := partsFor(name)
	if !ok {
		return Caps{}, fmt.Errorf("%w %q (known: %v)", ErrUnknownPolicy, name, Names())
	}
	return p.caps(), nil
}

// Contract is a driver's handle on one policy instance: the policy, its
// capabilities, and the optional hooks behind them, found once.
type Contract struct {
	Policy Policy
	Caps   Caps
	waker  Waker
	cold   interface{ SetColdStart(time.Duration) }
	look   interface {
		LookAhead(now time.Time, views []View, out []Decision)
	}
	refused  Refuser
	outcomes Outcomer
	// lookedAt is when an arrival last ran the Look-Ahead Scaler.
	lookedAt time.Time
}

// NewContract binds a policy for a driver with support s. It refuses a
// policy the driver cannot honour, and a policy whose capabilities name a
// hook it does not have.
func NewContract(p Policy, s Support) (*Contract, error) {
	c := &Contract{Policy: p, Caps: p.Caps()}
	// Whatever a policy says, its run order or its detailed view reads
	// the estimate.
	c.Caps.Estimates = c.Caps.Estimates || p.Order() != FIFO || c.Caps.Detailed
	if err := c.Caps.Refuse(p.Name(), s); err != nil {
		return nil, err
	}
	var ok bool
	if c.Caps.Wakes {
		if c.waker, ok = p.(Waker); !ok {
			return nil, fmt.Errorf("%w: policy %s wakes but has no NextWake", ErrBadSpec, p.Name())
		}
	}
	if c.Caps.ColdStart {
		if c.cold, ok = p.(interface{ SetColdStart(time.Duration) }); !ok {
			return nil, fmt.Errorf("%w: policy %s takes a cold start but has no SetColdStart", ErrBadSpec, p.Name())
		}
	}
	if c.Caps.LookAhead {
		if c.look, ok = p.(interface {
			LookAhead(time.Time, []View, []Decision)
		}); !ok {
			return nil, fmt.Errorf("%w: policy %s looks ahead but has no LookAhead", ErrBadSpec, p.Name())
		}
	}
	if c.Caps.Refusals {
		if c.refused, ok = p.(Refuser); !ok {
			return nil, fmt.Errorf("%w: policy %s counts refusals but has no Refused", ErrBadSpec, p.Name())
		}
	}
	if c.Caps.Outcomes {
		if c.outcomes, ok = p.(Outcomer); !ok {
			return nil, fmt.Errorf("%w: policy %s reads outcomes but has no Outcome", ErrBadSpec, p.Name())
		}
	}
	return c, nil
}

// Refuser is the hook of a policy with Caps.Refusals: Refused records a
// request that function fn's full queue refused, and returns the
// instances to start for fn at once.
type Refuser interface {
	Refused(now time.Time, fn int, size float64, c Counts) int
}

// Refused tells the policy, when it counts refusals, of a request that
// function fn's full queue refused (Admit returned Refuse), and returns
// the instances it wants started at once, which the driver applies as it
// applies Arrive's. Counts are fn's after the refusal.
func (c *Contract) Refused(now time.Time, fn int, size float64, n Counts) int {
	if c.outcomes != nil {
		c.outcomes.Outcome(now, fn, true, true)
	}
	if c.refused == nil {
		return 0
	}
	return c.refused.Refused(now, fn, size, n)
}

// Estimate is the predicted execution time a queued request carries
// (Entry.Pred), or 0 for a policy that reads none.
func (c *Contract) Estimate(fn int, size float64) int64 {
	if !c.Caps.Estimates {
		return 0
	}
	return int64(c.Policy.Estimate(fn, size))
}

// SetColdStart tells the policy the cold start to plan with, when it
// takes one.
func (c *Contract) SetColdStart(d time.Duration) {
	if c.cold != nil {
		c.cold.SetColdStart(d)
	}
}

// NextWake is the next instant after now the policy wants to plan at.
func (c *Contract) NextWake(now time.Time) (time.Time, bool) {
	if c.waker == nil {
		return time.Time{}, false
	}
	return c.waker.NextWake(now)
}

// LookAheadGap bounds how often arrivals run the Look-Ahead Scaler: it
// reads every function's view and packs every request upstream, so it runs
// at most once per gap, ten times a tick, and the tick covers the rest.
// BenchmarkChainLookAhead (pkg/sim, a chain under bursty load at 250
// requests/s) took 0.20 s a run before the simulator looked ahead on
// arrival, 2.39 s with a 5 ms gap and 0.48 s with this one.
const LookAheadGap = 50 * time.Millisecond

// LookAheadDue reports whether a request arriving at function fn of a
// chain of n functions runs the Look-Ahead Scaler now; if so the driver
// builds every view and calls LookAhead. It records the run.
func (c *Contract) LookAheadDue(now time.Time, fn, n int) bool {
	if c.look == nil || fn != 0 || n < 2 || (!c.lookedAt.IsZero() && now.Sub(c.lookedAt) < LookAheadGap) {
		return false
	}
	c.lookedAt = now
	return true
}

// LookAhead runs the Look-Ahead Scaler (see core.LookAhead): out[f].Add is
// what function f starts now.
func (c *Contract) LookAhead(now time.Time, views []View, out []Decision) {
	clear(out)
	if c.look != nil {
		c.look.LookAhead(now, views, out)
	}
}

// KeepAlive is how long an idle instance lives after its last request:
// the policy's instance model if it fixes one, else the driver's idle
// timeout.
func (c *Contract) KeepAlive(idleTimeout time.Duration) time.Duration {
	if k := c.Caps.Instances.KeepAlive; k > 0 {
		return k
	}
	return idleTimeout
}

// ExactExpiry reports whether an idle instance must stop exactly at the
// end of its keep-alive (the policy's instance model) rather than at the
// first tick after the idle timeout.
func (c *Contract) ExactExpiry() bool { return c.Caps.Instances.KeepAlive > 0 }
