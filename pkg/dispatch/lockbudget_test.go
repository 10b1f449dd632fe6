package dispatch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/stack"
)

// oneServer is a backend whose every instance is the same echo server:
// the test is about the dispatcher's lock, not about instances.
type oneServer struct {
	addr string
	ev   backend.Events
	seq  atomic.Int64
}

func (b *oneServer) Attach(ev backend.Events)                     { b.ev = ev }
func (b *oneServer) Deploy(context.Context, stack.Function) error { return nil }
func (b *oneServer) Undeploy(context.Context, string) error       { return nil }
func (b *oneServer) Stop(inst backend.Instance)                   { go b.ev.Exited(inst, nil) }
func (b *oneServer) Close(context.Context) error                  { return nil }

func (b *oneServer) Start(fn string, n int) {
	for range n {
		id := fmt.Sprintf("%s-%d", fn, b.seq.Add(1))
		go b.ev.Ready(backend.Instance{ID: id, Function: fn, Addr: b.addr})
	}
}

// An invocation through the gateway takes the dispatcher's lock at most
// twice for every function it passes through: to acquire a slot and to
// release it. A chain of two functions takes it four times, a lone
// function twice.
func TestTheRequestPathTakesTheLockTwicePerFunction(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	defer echo.Close()
	be := &oneServer{addr: strings.TrimPrefix(echo.URL, "http://")}
	d, err := dispatch.New(dispatch.Config{}, be)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close(context.Background()) }()
	s := &stack.Stack{Apps: []stack.App{{Name: "ab", Functions: []string{"a", "b"}}}}
	for _, name := range []string{"a", "b"} {
		f := stack.Function{Name: name, Command: "true"}
		f.Defaults()
		s.Functions = append(s.Functions, f)
	}
	if err := d.Load(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Config{Dispatcher: d})
	defer gw.Close()
	invoke := func(path string) {
		t.Helper()
		w := httptest.NewRecorder()
		gw.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader("hello")))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
	}
	invoke("/app/ab") // warm: both functions get an instance
	for path, most := range map[string]int64{"/app/ab": 4, "/function/a": 2} {
		taken := dispatch.CountLocks(d)
		invoke(path)
		if n := taken.Load(); n > most {
			t.Errorf("%s took the dispatcher's lock %d times, want at most %d", path, n, most)
		}
		t.Logf("%s took the dispatcher's lock %d times", path, taken.Load())
	}
}
