package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// keepBackend is inproc whose instances outlive the gateway, as
// kube.CloseKeep leaves a scaled-out gateway's pods to the other replicas.
type keepBackend struct{ *inproc }

func (keepBackend) Close(context.Context) error { return nil }

// A replica whose instances outlive it (KeepsInstances) answers the
// requests its drain ends at once, but keeps their slots busy, and so its
// Lease, until the instance must have finished them (the function's
// timeout plus HungGrace): another replica is never granted a slot the
// instance is still using. Measured by the instance's own count of its
// requests in flight.
func TestDrainKeepsTheSlotsOfWhatItEndsWhileInstancesOutliveIt(t *testing.T) {
	var inFlight atomic.Int64
	be := keepBackend{newInproc(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return
		}
		inFlight.Add(1)
		defer inFlight.Add(-1)
		time.Sleep(1500 * time.Millisecond) // whether the gateway listens or not
	}))}
	t.Cleanup(func() { _ = be.inproc.Close(context.Background()) })
	f := plainFunction("f")
	f.Timeout, f.Concurrency = 2*time.Second, 1
	srv, err := Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0", Stack: &stack.Stack{Functions: []stack.Function{f}},
		Backend: be, Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Gateway: Config{MaxBody: 1 << 20, HungGrace: 500 * time.Millisecond, KeepsInstances: true}})
	if err != nil {
		t.Fatal(err)
	}
	type reply struct {
		code       int
		mayHaveRun string
	}
	got := make(chan reply, 1)
	go func() {
		resp, err := http.Post(srv.URL()+"/function/f", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Error(err)
			got <- reply{}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got <- reply{resp.StatusCode, resp.Header.Get(MayHaveRunHeader)}
	}()
	waitUntil(t, "the instance running the request", func() bool { return inFlight.Load() == 1 })
	down := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		down <- srv.Shutdown(ctx)
	}()
	// The client is answered at the drain's deadline, not when the slot
	// goes: 504, it may have run.
	r := <-got
	if r.code != http.StatusGatewayTimeout || r.mayHaveRun != "true" {
		t.Fatalf("the request open at the drain's end: %d (may have run: %q), want 504 that may have run", r.code, r.mayHaveRun)
	}
	// While the instance still runs it, its slot is busy.
	running := 0
	srv.D.WithLock(func(l dispatch.Locked) {
		for name := range l.Functions() {
			for _, in := range l.Instances(name) {
				running += in.Running
			}
		}
	})
	if inFlight.Load() == 1 && running != 1 {
		t.Errorf("the instance still runs the request the drain ended, and the gateway counts %d slots busy", running)
	}
	if err := <-down; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if n := inFlight.Load(); n != 0 {
		t.Fatalf("the gateway let go of the slot while its instance still ran %d request(s)", n)
	}
}
