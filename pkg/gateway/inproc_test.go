package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// inproc is a backend whose instances are httptest servers in this
// process: for fuzzing and benchmarking the gateway without process spawns.
type inproc struct {
	h   http.Handler
	ev  backend.Events
	mu  sync.Mutex
	srv map[string]*httptest.Server
	seq int
}

func newInproc(h http.Handler) *inproc { return &inproc{h: h, srv: map[string]*httptest.Server{}} }

func (b *inproc) Attach(ev backend.Events)                     { b.ev = ev }
func (b *inproc) Deploy(context.Context, stack.Function) error { return nil }
func (b *inproc) Undeploy(context.Context, string) error       { return nil }

func (b *inproc) Start(fn string, n int) {
	for range n {
		b.mu.Lock()
		b.seq++
		id := fmt.Sprintf("%s-%d", fn, b.seq)
		s := httptest.NewServer(b.h)
		b.srv[id] = s
		b.mu.Unlock()
		go b.ev.Ready(backend.Instance{ID: id, Function: fn, Addr: strings.TrimPrefix(s.URL, "http://")})
	}
}

func (b *inproc) Stop(inst backend.Instance) {
	b.mu.Lock()
	s := b.srv[inst.ID]
	delete(b.srv, inst.ID)
	b.mu.Unlock()
	if s != nil {
		go func() { s.Close(); b.ev.Exited(inst, nil) }()
	}
}

func (b *inproc) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, s := range b.srv {
		s.Close()
		delete(b.srv, id)
	}
	return nil
}

var echoHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		_, _ = w.Write([]byte("ok"))
	}
})

func inprocGateway(tb testing.TB, fns ...stack.Function) (*Gateway, *dispatch.Dispatcher) {
	tb.Helper()
	d, err := dispatch.New(dispatch.Config{}, newInproc(echoHandler))
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range fns {
		if err := d.Deploy(context.Background(), f); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(func() { _ = d.Close(context.Background()) })
	g := New(Config{Dispatcher: d, MaxBody: 1 << 16})
	tb.Cleanup(g.Close)
	return g, d
}

func plainFunction(name string) stack.Function {
	f := stack.Function{Name: name, Command: "x", SizeSensitive: true, MaxQueue: 64}
	f.Defaults()
	return f
}

// Whatever a client sends, the gateway answers with a status and a reason,
// never a panic, and counts every accepted request as ended.
func FuzzInvokeHandlers(f *testing.F) {
	f.Add("POST", "/function/f", "body", "X-Input-Size", "3")
	f.Add("POST", "/function/sized", "", "X-Input-Size", "-1")
	f.Add("GET", "/function/f/sub/path?x=1", "", "", "")
	f.Add("POST", "/app/chain", "abc", "Content-Type", "text/plain")
	f.Add("POST", "/system/functions", `{"service":"n","envProcess":"x","labels":{"com.openfaas.scale.max":"-3"}}`, "", "")
	f.Add("POST", "/system/scale-function/f", `{"replicas":99999}`, "", "")
	f.Add("POST", "/system/apps", `{"name":"a","functions":["f","f"]}`, "", "")
	sized := plainFunction("sized")
	sized.SizeHeader = "X-Input-Size"
	g, d := inprocGateway(f, plainFunction("f"), sized, plainFunction("g"))
	if err := d.DeployApp(stack.App{Name: "chain", Functions: []string{"f", "g"}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, body, hk, hv string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\x00") {
			return
		}
		req, err := http.NewRequest(method, "http://gw"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		if hk != "" && http.CanonicalHeaderKey(hk) != "" && !strings.ContainsAny(hk+hv, "\r\n\x00:") {
			req.Header.Set(hk, hv)
		}
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if rec.Code >= 400 && rec.Code != 404 && rec.Code != 405 && strings.TrimSpace(rec.Body.String()) == "" {
			t.Fatalf("%s %s: %d without a reason", method, path, rec.Code)
		}
	})
}
