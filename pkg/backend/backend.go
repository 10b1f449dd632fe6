// Package backend runs function instances for the gateway. The dispatcher
// decides how many instances each function has; a Backend carries those
// decisions out and reports, asynchronously, what became of them. The local
// runtime (the default) runs each instance as a process on this machine; the
// Kubernetes backend scales an RTResource per function.
package backend

import (
	"context"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

// Instance is one running copy of a function that the gateway can send
// requests to.
type Instance struct {
	ID       string
	Function string
	// Addr is host:port; the instance answers POST / there.
	Addr string
	// ColdStart is the time from asking for the instance to its readiness.
	ColdStart time.Duration
}

// Events receives what happens to instances. Backends call it from their
// own goroutines, never while holding a lock the receiver may need.
type Events interface {
	// Ready reports a started instance that passed its health check.
	Ready(inst Instance)
	// Failed reports a start that never became ready.
	Failed(function string, err error)
	// Exited reports that a ready instance is gone: stopped (err nil) or
	// crashed.
	Exited(inst Instance, err error)
}

// Backend runs instances.
type Backend interface {
	// Attach sets where events go; it is called once, before anything else.
	Attach(ev Events)
	// Deploy registers (or updates) a function; it starts no instance.
	Deploy(ctx context.Context, f stack.Function) error
	// Undeploy stops every instance of a function and forgets it.
	Undeploy(ctx context.Context, name string) error
	// Start asks for n more instances of a deployed function; each ends
	// in exactly one Ready or Failed event.
	Start(function string, n int)
	// Stop ends an instance gracefully; Exited follows.
	Stop(inst Instance)
	// Close stops every instance and waits for them, bounded by ctx.
	Close(ctx context.Context) error
}
