package backend

import (
	"fmt"
	"io"

	"gantry.dev/gantry/pkg/stack"
)

// InstanceHook prepares each local instance before it is spawned: the
// gateway uses it to hand an instance its secrets, to collect its output
// for /system/logs, and to watch its memory. It runs on the spawning
// goroutine; an error fails the start (a Failed event).
type InstanceHook func(id string, f stack.Function) (Prepared, error)

// Prepared is what a hook adds to one instance. Every field may be nil.
type Prepared struct {
	// Env is added to the instance's environment.
	Env []string
	// Output receives the instance's stdout, besides LocalConfig.Log, and
	// its stderr too unless Stderr is set. A writer that cuts lines needs
	// one per stream: the two are separate pipes read concurrently, so a
	// partial line on one would otherwise join a line of the other.
	Output io.Writer
	// Stderr receives the instance's stderr, besides LocalConfig.Log.
	Stderr io.Writer
	// Started hears the instance's process ID once it runs (the leader
	// of its process group).
	Started func(pid int)
	// Done runs once the process has exited, or when the start failed
	// before the process ran.
	Done func()
}

// refusal is LocalRefusal, except that with a hook set the secrets, limits
// and requests are the hook's: the gateway's hands each instance its
// secrets, enforces the memory limit, and puts the instance in a cgroup
// for the CPU limit and the CPU and memory requests (refusing them through
// the deploy check where it can create none).
func (l *Local) refusal(f stack.Function) error {
	l.mu.Lock()
	hooked := l.hook != nil
	check := l.check
	l.mu.Unlock()
	if check != nil {
		if err := check(f); err != nil {
			return fmt.Errorf("%w: function %q: %v", stack.ErrInvalid, f.Name, err)
		}
	}
	if hooked {
		f.Secrets, f.Limits, f.Requests = nil, stack.Resources{}, stack.Resources{}
	}
	return LocalRefusal(f)
}

// SetDeployCheck sets a check every deploy passes before the hook's
// fields are taken as honoured: the gateway refuses a CPU limit it has no
// cgroup to enforce with. Its error is an HTTP 400.
func (l *Local) SetDeployCheck(check func(stack.Function) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.check = check
}

// SetInstanceHook sets the hook; call it before the first Start.
func (l *Local) SetInstanceHook(h InstanceHook) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hook = h
}

// prepare runs the hook, if any.
func (l *Local) prepare(id string, f stack.Function) (Prepared, error) {
	l.mu.Lock()
	h := l.hook
	l.mu.Unlock()
	if h == nil {
		return Prepared{}, nil
	}
	return h(id, f)
}

func (p Prepared) done() {
	if p.Done != nil {
		p.Done()
	}
}
