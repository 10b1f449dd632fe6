package liverun

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/trace"
)

// An interrupted run signals its gateways at once, while its load still
// waits for the requests in flight, rather than once that wait is over
// (before, the two took turns: 1.3 s from SIGINT to the first SIGTERM and
// 2 s in all on a loaded machine). The "gateway" is a shell that records
// each SIGTERM and never stops by itself; the routes it would serve are a
// test server whose load route holds each request until the gateway has
// been signalled, or until the load aborts it.
func TestInterruptSignalsTheGatewaysWhileTheLoadDrains(t *testing.T) {
	dir := t.TempDir()
	terms := filepath.Join(dir, "terms")
	var arrived, signalled, aborted atomic.Int64
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /system/functions", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `[{"name":"f"}]`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `gantry_function_replicas{function="f"} 1`)
		fmt.Fprintln(w, `gantry_function_instances_started_total{function="f"} 1`)
	})
	mux.HandleFunc("POST /function/f", func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		interrupt()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, _ := os.ReadFile(terms); len(b) > 0 {
				signalled.Add(1)
				return
			}
			select {
			case <-r.Context().Done():
				aborted.Add(1)
				return
			case <-tick.C:
			}
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	exe := filepath.Join(dir, "gateway")
	script := fmt.Sprintf("#!/bin/sh\ntrap 'echo term >> %s' TERM\necho 'level=INFO %s url=%s' >&2\nwhile :; do sleep 0.05; done\n",
		terms, listenMarker, srv.URL)
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The load's drain is long, so that a gateway signalled only after it
	// would find every request aborted already.
	st := streamSpec{name: "f", path: "/function/f", slo: time.Second,
		load: loadgen.Config{Trace: trace.Trace{PerSecond: []float64{50, 50, 50, 50}}, SLO: time.Second, Drain: 20 * time.Second}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, stopped, err := runArms(ctx, armsConfig{exe: exe, arms: []armSpec{{name: "a", policy: "gantry"}},
			streams: []streamSpec{st}, functions: 1})
		if err != nil {
			t.Errorf("runArms: %v", err)
		}
		stopped()
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the interrupted run did not end before its load's drain")
	}
	if arrived.Load() == 0 {
		t.Fatal("no request reached the gateway")
	}
	if signalled.Load() == 0 || aborted.Load() > 0 {
		t.Errorf("of %d requests in flight, %d saw the gateway signalled and %d were aborted first", arrived.Load(), signalled.Load(), aborted.Load())
	}
}

// The progress shows what each arm's gateway says of its functions: the
// SLO each is bound to, its state, and its instances, read from a real
// gateway's /system/functions.
func TestProgressReadsEachFunctionsSLOAndState(t *testing.T) {
	s, err := stack.Parse("t.yml", []byte("functions:\n  zeta:\n    fprocess: gantry fn sentiment\n    slo: 250ms\n    scale: {min: 1, max: 3}\n  alpha:\n    fprocess: gantry fn sentiment\n    slo: 80ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := gateway.Start(ctx, gateway.ServerConfig{Addr: "127.0.0.1:0", Stack: s,
		Backend: backend.NewLocal(backend.LocalConfig{}), Dispatch: dispatch.Config{Policy: "gantry"}})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(srv)
	a := &arm{spec: armSpec{name: "gantry"}, gw: &gatewayProc{url: srv.URL(), client: &http.Client{Timeout: 5 * time.Second}}}
	// zeta's minimum instance starts by itself; wait until it is ready.
	deadline := time.Now().Add(30 * time.Second)
	for {
		readFunctions([]*arm{a})
		fns := a.progress().Functions
		if len(fns) == 2 && fns[1].Available == 1 {
			if fns[0].Name != "alpha" || fns[0].SLO != "80ms" || fns[0].Replicas != 0 || fns[1].SLO != "250ms" || fns[1].State != "ready" || fns[1].Replicas != 1 {
				t.Fatalf("functions = %+v", fns)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zeta's instance not ready in time: %+v", fns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
