package cli

import (
	"context"
	"io"
	"testing"
	"time"

	"gantry.dev/gantry/examples"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/stack"
)

// exampleStack is examples/stack.yml from this package's folder.
const exampleStack = "../../examples/stack.yml"

// gantry load judges by the SLO the gateway serves: it reads the app's and
// the function's from a real gateway's API, not from a table of its own.
func TestLoadTakesTheSLOFromTheGateway(t *testing.T) {
	s, err := stack.Parse("examples/stack.yml", examples.Stack)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := gateway.Start(ctx, gateway.ServerConfig{Addr: "127.0.0.1:0", Stack: s,
		Backend: backend.NewLocal(backend.LocalConfig{Log: io.Discard})})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = srv.Shutdown(sctx)
	}()
	app, err := targetFromGateway(ctx, &loadFlags{gateway: srv.URL(), app: "audio-translation"})
	if err != nil || app.slo != 350*time.Millisecond || app.app != "audio-translation" {
		t.Errorf("app: %+v, %v; want the stack's 350ms", app, err)
	}
	fn, err := targetFromGateway(ctx, &loadFlags{gateway: srv.URL(), function: "image-compress"})
	if err != nil || fn.slo != 1500*time.Millisecond || fn.app != "image-compression" {
		t.Errorf("function: %+v, %v; want 1500ms in app image-compression", fn, err)
	}
	if _, err := targetFromGateway(ctx, &loadFlags{gateway: srv.URL(), app: "nope"}); err == nil {
		t.Error("an app the gateway does not serve got an SLO")
	}
}

// The same SLOs come from the stack file.
func TestLoadTakesTheSLOFromTheStackFile(t *testing.T) {
	app, err := targetFromStack(&loadFlags{stack: exampleStack, app: "audio-translation"})
	if err != nil || app.slo != 350*time.Millisecond {
		t.Errorf("app: %+v, %v", app, err)
	}
	fn, err := targetFromStack(&loadFlags{stack: exampleStack, function: "send-message"})
	if err != nil || fn.slo != 50*time.Millisecond || fn.app != "audio-translation" {
		t.Errorf("function: %+v, %v", fn, err)
	}
	if _, err := targetFromStack(&loadFlags{stack: exampleStack, function: "nope"}); err == nil {
		t.Error("a function the stack lacks got an SLO")
	}
}
