package backend

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"gantry.dev/gantry/pkg/stack"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// With a hook the local runtime takes secrets and limits (the hook's to
// honour) and runs the hook around each instance; without one it refuses
// them.
func TestInstanceHookAddsEnvironmentAndHearsTheProcess(t *testing.T) {
	f := instanceFn(t, "hooked", "serve")
	f.Secrets = []string{"s"}
	f.Limits = stack.Resources{Memory: "64Mi"}
	bare, _ := newTestLocal(t, LocalConfig{})
	if err := bare.Deploy(context.Background(), f); !errors.Is(err, stack.ErrInvalid) {
		t.Fatalf("without a hook: %v", err)
	}
	l, rec := newTestLocal(t, LocalConfig{})
	var out lockedBuffer
	pids, done := make(chan int, 1), make(chan struct{})
	l.SetInstanceHook(func(id string, got stack.Function) (Prepared, error) {
		return Prepared{Env: []string{"GREETING=from-the-hook"}, Output: &out,
			Started: func(pid int) { pids <- pid }, Done: func() { close(done) }}, nil
	})
	if err := l.Deploy(context.Background(), f); err != nil {
		t.Fatalf("with a hook: %v", err)
	}
	l.Start("hooked", 1)
	if ev := rec.next(t); ev != "ready" {
		t.Fatalf("event %s", ev)
	}
	if pid := <-pids; pid <= 0 || pid == os.Getpid() {
		t.Fatalf("pid %d", pid)
	}
	rec.mu.Lock()
	inst := rec.ready[0]
	rec.mu.Unlock()
	resp, err := http.Get("http://" + inst.Addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if body := string(b); !strings.Contains(body, "from-the-hook") {
		t.Fatalf("the instance answered %q", body)
	}
	l.Stop(inst)
	<-done
}
