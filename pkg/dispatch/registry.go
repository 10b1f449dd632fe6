package dispatch

// The registry: functions and apps deployed, updated and removed. Every
// change is whole or nothing: policies are built before anything is
// named, and the catalog (catalog.go) is republished after.

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// Deploy adds a function; ErrExists if it is already deployed, and the
// peers' refusal (ErrRefused) where they allow no writes.
func (d *Dispatcher) Deploy(ctx context.Context, f stack.Function) error {
	if err := d.writable(); err != nil {
		return err
	}
	return d.deploy(ctx, f)
}

func (d *Dispatcher) deploy(ctx context.Context, f stack.Function) error {
	if err := d.checkDeployable(f); err != nil {
		return err
	}
	if err := d.be.Deploy(ctx, f); err != nil {
		return err
	}
	err := d.register(f)
	if err != nil && !errors.Is(err, ErrExists) {
		// Nothing of f was registered: take back what the backend
		// deployed, so that a retry starts from nothing. ErrExists is a
		// deploy of the same name that won a race; its backend deployment
		// is the winner's, and stays.
		err = errors.Join(err, d.be.Undeploy(ctx, f.Ref()))
		d.mu.Lock()
		delete(d.early, f.Ref())
		d.mu.Unlock()
	}
	return err
}

// checkDeployable refuses, before the backend is asked, a function this
// dispatcher would not take.
func (d *Dispatcher) checkDeployable(f stack.Function) error {
	if err := f.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	_, exists := d.fns[f.Ref()]
	closed, full := d.closed, len(d.fns) >= stack.MaxFunctions
	d.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case exists:
		return fmt.Errorf("%w: function %q", ErrExists, f.Ref())
	case full:
		return fmt.Errorf("%w: this gateway already serves %d functions, the most it takes", stack.ErrInvalid, stack.MaxFunctions)
	}
	return nil
}

// register adds a deployed function with a policy of its own, or nothing:
// the policy is built before the function is named anywhere.
func (d *Dispatcher) register(f stack.Function) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, exists := d.fns[f.Ref()]; exists {
		return fmt.Errorf("%w: function %q", ErrExists, f.Ref())
	}
	fn := &function{decl: f, coldStart: policy.NewColdStartEstimate(f.ColdStart), created: d.cfg.Now()}
	g, err := d.lockedNewGroup([]*function{fn}, f.Ref(), 0)
	if err != nil {
		return err
	}
	d.fns[f.Ref()] = fn
	d.lockedJoin(g)
	if !d.closed {
		d.lockedAdoptEarly(fn, d.cfg.Now())
	}
	d.lockedPublish()
	return nil
}

// Update replaces a function's declaration. Its instances drain and new
// ones start with the new declaration; queued requests keep their place.
func (d *Dispatcher) Update(ctx context.Context, f stack.Function) error {
	if err := d.writable(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	fn, ok := d.fns[f.Ref()]
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: function %q", ErrNotFound, f.Ref())
	}
	if err := d.be.Deploy(ctx, f); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lockedRedeclare(fn, f)
}

// lockedRedeclare rebuilds fn's group with its new declaration, and only
// then drains its instances: a policy that refuses the new declaration
// leaves the function as it was.
func (d *Dispatcher) lockedRedeclare(fn *function, f stack.Function) error {
	old, prev := fn.g, fn.decl
	fn.decl = f
	g, err := d.lockedNewGroup(old.chain, old.name, old.declaredSLO)
	if err != nil {
		fn.decl = prev
		return err
	}
	for _, in := range slices.Clone(fn.ready) {
		d.lockedDrain(in)
	}
	// A new declaration starts with a fresh back-off, as Kubernetes rolls
	// out new pods: a fixed function serves on the next request.
	fn.loop.Reset()
	d.lockedLeave(old)
	d.lockedJoin(g)
	if d.apps[old.name] == old {
		d.apps[old.name] = g
	}
	d.lockedPublish()
	return nil
}

// Remove undeploys a function. A function an app chains cannot be removed
// before the app.
func (d *Dispatcher) Remove(ctx context.Context, name string) error {
	if err := d.writable(); err != nil {
		return err
	}
	d.mu.Lock()
	fn, ok := d.fns[name]
	if !ok {
		d.mu.Unlock()
		return fmt.Errorf("%w: function %q", ErrNotFound, name)
	}
	if fn.g.name != name || len(fn.g.chain) > 1 || d.apps[fn.g.name] == fn.g {
		d.mu.Unlock()
		return fmt.Errorf("%w: function %q is chained by app %q; remove the app first", ErrInUse, name, fn.g.name)
	}
	delete(d.fns, name)
	d.lockedLeave(fn.g)
	d.lockedPublish()
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
	if err := d.writable(); err != nil {
		return err
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
			return fmt.Errorf("%w: function %q is already chained by app %q", ErrInUse, name, fn.g.name)
		}
		if slices.Contains(chain[:i], fn) {
			return fmt.Errorf("%w: app %q chains %q twice", stack.ErrInvalid, a.Name, name)
		}
		chain[i] = fn
	}
	g, err := d.lockedNewGroup(chain, a.Name, a.SLO)
	if err != nil {
		return err
	}
	for _, fn := range chain {
		d.lockedLeave(fn.g)
	}
	d.lockedJoin(g)
	d.apps[a.Name] = g
	d.lockedPublish()
	return nil
}

// RemoveApp dissolves an app; its functions get policies of their own.
func (d *Dispatcher) RemoveApp(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.peers.Writes(); err != nil {
		return err
	}
	g, ok := d.apps[name]
	if !ok {
		return fmt.Errorf("%w: app %q", ErrNotFound, name)
	}
	// Every function's own policy is built before the app is touched, so
	// a policy that refuses one leaves the app standing.
	alone := make([]*group, len(g.chain))
	for i, fn := range g.chain {
		var err error
		if alone[i], err = d.lockedNewGroup([]*function{fn}, fn.decl.Ref(), 0); err != nil {
			return err
		}
	}
	delete(d.apps, name)
	d.lockedLeave(g)
	for _, a := range alone {
		d.lockedJoin(a)
	}
	d.lockedPublish()
	return nil
}

// lockedFailQueued wakes every request queued at fn with err.
func (d *Dispatcher) lockedFailQueued(fn *function, err error) {
	if fn.queue == nil {
		return // never joined a group: nothing can have queued
	}
	var failed []*call
	fn.queue.RemoveFunc(func(c *call) bool {
		failed = append(failed, c)
		return true
	})
	failed = append(failed, fn.bound...)
	fn.bound = nil
	for _, c := range failed {
		c.fail(err)
	}
}

// writable is nil when the peers allow API writes to the functions.
func (d *Dispatcher) writable() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peers.Writes()
}
