package backend

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
)

// ExitError is why an instance ended on its own: its exit status and the
// last lines it wrote to stderr, which the gateway passes on to clients
// and the API (a crash loop's reason).
type ExitError struct {
	Instance string
	// Phase is "before ready" or "after ready".
	Phase string
	// Code is the exit code, -1 when a signal ended the process.
	Code   int
	Signal string
	// Stderr is the last lines of the instance's stderr, oldest first.
	Stderr []string
}

func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "instance %s exited %s", e.Instance, e.Phase)
	if e.Signal != "" {
		fmt.Fprintf(&b, ", killed by %s", e.Signal)
	} else {
		fmt.Fprintf(&b, " with exit code %d", e.Code)
	}
	if len(e.Stderr) > 0 {
		fmt.Fprintf(&b, "; last stderr: %s", strings.Join(e.Stderr, " | "))
	}
	return b.String()
}

// exitError describes a process that has been waited for.
func exitError(id, phase string, st *os.ProcessState, stderr []string) *ExitError {
	e := &ExitError{Instance: id, Phase: phase, Code: -1, Stderr: stderr}
	if st == nil {
		return e
	}
	e.Code = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal().String()
	}
	return e
}

// Bounds of the stderr an instance's exit reason quotes.
const (
	tailLines   = 5
	tailLineLen = 200
)

// tail keeps the last lines written to it, each cut to tailLineLen bytes,
// so an instance's exit can say what it last complained about.
type tail struct {
	mu    sync.Mutex
	lines []string
	cur   []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range b {
		if c == '\n' {
			t.push()
			continue
		}
		if len(t.cur) < tailLineLen {
			t.cur = append(t.cur, c)
		}
	}
	return len(b), nil
}

func (t *tail) push() {
	if len(t.cur) == 0 {
		return
	}
	t.lines = append(t.lines, string(t.cur))
	if len(t.lines) > tailLines {
		t.lines = t.lines[1:]
	}
	t.cur = t.cur[:0]
}

// Lines returns the last lines, a line not ended by a newline included.
func (t *tail) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.lines...)
	if len(t.cur) > 0 {
		out = append(out, string(t.cur))
		if len(out) > tailLines {
			out = out[1:]
		}
	}
	return out
}
