package gateway

// What the gateway adds to each local instance through the backend's
// hook: its secrets (secrets.go) and a writer of its output into the
// function's log ring (logs.go), and its memory watchdog (limits.go).

import (
	"context"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/funclogs"
	"gantry.dev/gantry/pkg/stack"
)

// podLogReader is a backend that reads its instances' logs itself (the
// Kubernetes backend: pod logs).
type podLogReader interface {
	Logs(ctx context.Context, ref string, q funclogs.Query, follow bool, emit func(funclogs.Line) error) error
}

// attachLocal hooks the gateway into a local backend's instance starts;
// other backends run their instances elsewhere, and may keep their logs
// and secrets themselves.
func (g *Gateway) attachLocal(be backend.Backend) {
	if k, ok := be.(secretKeeper); ok {
		g.cluster = k
	}
	if lr, ok := be.(podLogReader); ok {
		g.podLogs = lr
	}
	if nb, ok := be.(namespaceBackend); ok {
		g.ns.be = nb
	}
	l, ok := be.(*backend.Local)
	if !ok {
		return
	}
	g.local = true
	l.SetInstanceHook(g.prepareInstance)
	l.SetDeployCheck(g.limits.refuseUnenforceable)
}

func (g *Gateway) prepareInstance(id string, f stack.Function) (backend.Prepared, error) {
	env, cleanup, err := g.secretsFor(id, f)
	if err != nil {
		return backend.Prepared{}, err
	}
	// A line cutter per stream, so that a partial line on one is never
	// joined to a line of the other.
	out, errOut := g.logs.Writer(f.Ref(), id), g.logs.Writer(f.Ref(), id)
	started, unwatch := g.watchMemory(id, f)
	return backend.Prepared{Env: env, Output: out, Stderr: errOut, Started: started, Done: func() {
		if unwatch != nil {
			unwatch()
		}
		out.Close()
		errOut.Close()
		if cleanup != nil {
			cleanup()
		}
	}}, nil
}
