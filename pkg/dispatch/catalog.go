package dispatch

import (
	"slices"

	"gantry.dev/gantry/pkg/stack"
)

// catalog is the registry as the request path reads it before it queues:
// every function's declaration and every app's chain. It is rebuilt under
// the lock whenever the registry changes and read without it, so that an
// invocation takes the lock only to acquire its slot and to release it.
type catalog struct {
	fns  map[string]stack.Function
	apps map[string]AppInfo
}

// lockedPublish replaces the catalog with the registry as it is now. Only
// deploys and removals call it, so rebuilding it whole costs nothing that
// matters.
func (d *Dispatcher) lockedPublish() {
	c := &catalog{fns: make(map[string]stack.Function, len(d.fns)), apps: make(map[string]AppInfo, len(d.apps))}
	for name, fn := range d.fns {
		c.fns[name] = fn.decl
	}
	for name, g := range d.apps {
		c.apps[name] = g.info()
	}
	d.published.Store(c)
}

// Lookup returns a function's declaration.
func (d *Dispatcher) Lookup(name string) (stack.Function, bool) {
	f, ok := d.published.Load().fns[name]
	return f, ok
}

// App returns one app.
func (d *Dispatcher) App(name string) (AppInfo, bool) {
	a, ok := d.published.Load().apps[name]
	if !ok {
		return AppInfo{}, false
	}
	// The catalog is shared by every reader: the caller gets its own.
	a.Functions, a.Budget = slices.Clone(a.Functions), slices.Clone(a.Budget)
	return a, true
}
