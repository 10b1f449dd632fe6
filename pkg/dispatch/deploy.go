package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
)

// ErrRemoved fails the requests still queued for a function being removed.
var ErrRemoved = errors.New("function removed")

// Load deploys a stack: every function, then every app.
func (d *Dispatcher) Load(ctx context.Context, s *stack.Stack) error {
	for _, f := range s.Functions {
		if err := d.deploy(ctx, f); err != nil {
			return err
		}
	}
	for _, a := range s.Apps {
		if err := d.deployApp(a); err != nil {
			return err
		}
	}
	return nil
}

// Deploy adds a function; ErrExists if it is already deployed, and
// ErrScaledOut on a replica of a scaled-out gateway.
func (d *Dispatcher) Deploy(ctx context.Context, f stack.Function) error {
	if d.scaledOut() {
		return ErrScaledOut
	}
	return d.deploy(ctx, f)
}

func (d *Dispatcher) deploy(ctx context.Context, f stack.Function) error {
	if err := f.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	_, exists := d.fns[f.Name]
	closed, full := d.closed, len(d.fns) >= stack.MaxFunctions
	d.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case exists:
		return fmt.Errorf("%w: function %q", ErrExists, f.Name)
	case full:
		return fmt.Errorf("%w: this gateway already serves %d functions, the most it takes", stack.ErrInvalid, stack.MaxFunctions)
	}
	if err := d.be.Deploy(ctx, f); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, exists := d.fns[f.Name]; exists {
		return fmt.Errorf("%w: function %q", ErrExists, f.Name)
	}
	fn := &function{decl: f, coldStart: f.ColdStart}
	d.fns[f.Name] = fn
	return d.lockedRegroup([]*function{fn}, f.Name, 0)
}

// Update replaces a function's declaration. Its instances drain and new
// ones start with the new declaration; queued requests keep their place.
func (d *Dispatcher) Update(ctx context.Context, f stack.Function) error {
	if d.scaledOut() {
		return ErrScaledOut
	}
	if err := f.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	fn, ok := d.fns[f.Name]
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: function %q", ErrNotFound, f.Name)
	}
	if err := d.be.Deploy(ctx, f); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fn.decl = f
	for _, in := range slices.Clone(fn.ready) {
		d.lockedDrain(in)
	}
	old := fn.g
	d.groups = slices.DeleteFunc(d.groups, func(g *group) bool { return g == old })
	if err := d.lockedRegroup(old.chain, old.name, old.declaredSLO); err != nil {
		return err
	}
	if d.apps[old.name] == old {
		d.apps[old.name] = fn.g
	}
	return nil
}

// Remove undeploys a function. A function an app chains cannot be removed
// before the app.
func (d *Dispatcher) Remove(ctx context.Context, name string) error {
	if d.scaledOut() {
		return ErrScaledOut
	}
	d.mu.Lock()
	fn, ok := d.fns[name]
	if !ok {
		d.mu.Unlock()
		return fmt.Errorf("%w: function %q", ErrNotFound, name)
	}
	if fn.g.name != name || len(fn.g.chain) > 1 || d.apps[fn.g.name] == fn.g {
		d.mu.Unlock()
		return fmt.Errorf("%w: function %q is chained by app %q; remove the app first", ErrExists, name, fn.g.name)
	}
	delete(d.fns, name)
	d.groups = slices.DeleteFunc(d.groups, func(g *group) bool { return g == fn.g })
	d.lockedFailQueued(fn, ErrRemoved)
	for _, in := range fn.ready {
		in.gone = true
		delete(d.byID, in.ID)
		d.live--
	}
	// Starts still pending are counted off as their events arrive for a
	// function that no longer exists.
	d.mu.Unlock()
	return d.be.Undeploy(ctx, name)
}

// DeployApp chains deployed functions into an app with one policy. A
// function belongs to at most one app.
func (d *Dispatcher) DeployApp(a stack.App) error {
	if d.scaledOut() {
		return ErrScaledOut
	}
	return d.deployApp(a)
}

func (d *Dispatcher) deployApp(a stack.App) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	declared := map[string]bool{}
	for name := range d.fns {
		declared[name] = true
	}
	if err := a.Validate(declared); err != nil {
		return err
	}
	if _, ok := d.apps[a.Name]; ok {
		return fmt.Errorf("%w: app %q", ErrExists, a.Name)
	}
	if len(d.apps) >= stack.MaxFunctions {
		return fmt.Errorf("%w: this gateway already serves %d apps, the most it takes", stack.ErrInvalid, stack.MaxFunctions)
	}
	if _, ok := d.fns[a.Name]; ok && !slices.Equal(a.Functions, []string{a.Name}) {
		return fmt.Errorf("%w: app %q has the name of a function it does not wrap", ErrExists, a.Name)
	}
	chain := make([]*function, len(a.Functions))
	for i, name := range a.Functions {
		fn := d.fns[name]
		if fn.g != nil && d.apps[fn.g.name] == fn.g {
			return fmt.Errorf("%w: function %q is already chained by app %q", ErrExists, name, fn.g.name)
		}
		if slices.Contains(chain[:i], fn) {
			return fmt.Errorf("%w: app %q chains %q twice", stack.ErrInvalid, a.Name, name)
		}
		chain[i] = fn
	}
	for _, fn := range chain {
		old := fn.g
		d.groups = slices.DeleteFunc(d.groups, func(g *group) bool { return g == old })
	}
	if err := d.lockedRegroup(chain, a.Name, a.SLO); err != nil {
		return err
	}
	d.apps[a.Name] = chain[0].g
	return nil
}

// RemoveApp dissolves an app; its functions get policies of their own.
func (d *Dispatcher) RemoveApp(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.role != Solo {
		return ErrScaledOut
	}
	g, ok := d.apps[name]
	if !ok {
		return fmt.Errorf("%w: app %q", ErrNotFound, name)
	}
	delete(d.apps, name)
	d.groups = slices.DeleteFunc(d.groups, func(x *group) bool { return x == g })
	for _, fn := range g.chain {
		if err := d.lockedRegroup([]*function{fn}, fn.decl.Name, 0); err != nil {
			return err
		}
	}
	return nil
}

// lockedRegroup builds the policy for a chain and puts its functions in
// the group. slo 0 means the sum of the functions' SLOs.
func (d *Dispatcher) lockedRegroup(chain []*function, name string, slo time.Duration) error {
	var sum time.Duration
	for _, fn := range chain {
		sum += fn.decl.SLO
	}
	declared := slo
	if slo <= 0 {
		slo = sum
	}
	g := &group{name: name, slo: slo, declaredSLO: declared, chain: chain, views: make([]policy.View, len(chain)),
		decs: make([]policy.Decision, len(chain)), cum: make([]time.Duration, len(chain))}
	spec := policy.Spec{App: name, AppSLO: slo, Window: d.cfg.Window, Start: d.cfg.Now(), Seed: d.cfg.Seed, Tick: d.cfg.Tick,
		MinSize: chain[0].decl.MinSize, MaxSize: chain[0].decl.MaxSize}
	var cum time.Duration
	for i, fn := range chain {
		share := time.Duration(float64(slo) * float64(fn.decl.SLO) / float64(sum))
		cum += share
		g.cum[i] = cum
		spec.Functions = append(spec.Functions, policy.FunctionSpec{Name: fn.decl.Name, SLO: share,
			SizeSensitive: fn.decl.SizeSensitive})
		spec.ColdStart = max(spec.ColdStart, fn.coldStart)
	}
	pol, err := d.cfg.NewPolicy(d.cfg.Policy, spec)
	if err != nil {
		return err
	}
	g.pol, g.coldStart = pol, spec.ColdStart
	for i, fn := range chain {
		fn.g, fn.idx = g, i
		if fn.queue == nil || fn.queue.Len() == 0 {
			fn.queue = policy.NewRunQueue[*call](pol.Order(), policy.RoundLen(d.cfg.Tick, spec.Functions[i].SLO))
		}
	}
	d.groups = append(d.groups, g)
	return nil
}

// lockedFailQueued wakes every request queued at fn with err.
func (d *Dispatcher) lockedFailQueued(fn *function, err error) {
	var failed []*call
	fn.queue.RemoveFunc(func(c *call) bool {
		failed = append(failed, c)
		return true
	})
	for _, c := range failed {
		c.fail(err)
	}
}
