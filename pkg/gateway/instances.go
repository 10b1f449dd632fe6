package gateway

// What the gateway adds to each local instance through the backend's
// hook: its secrets (secrets.go) and a writer of its output into the
// function's log ring (logs.go), and its memory watchdog (limits.go).

import (
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

// attachLocal hooks the gateway into a local backend's instance starts;
// other backends run their instances elsewhere.
func (g *Gateway) attachLocal(be backend.Backend) {
	l, ok := be.(*backend.Local)
	if !ok {
		return
	}
	g.local = true
	l.SetInstanceHook(g.prepareInstance)
}

func (g *Gateway) prepareInstance(id string, f stack.Function) (backend.Prepared, error) {
	env, cleanup, err := g.secretsFor(id, f)
	if err != nil {
		return backend.Prepared{}, err
	}
	out := g.logs.Writer(f.Ref(), id)
	started, unwatch := g.watchMemory(id, f)
	return backend.Prepared{Env: env, Output: out, Started: started, Done: func() {
		if unwatch != nil {
			unwatch()
		}
		out.Close()
		if cleanup != nil {
			cleanup()
		}
	}}, nil
}
