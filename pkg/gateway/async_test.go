package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gantry.dev/gantry/pkg/async"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/callid"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// startAsyncGateway serves a stack with the embedded JetStream queue,
// stored in a folder of the test's.
func startAsyncGateway(t *testing.T, s *stack.Stack, ac async.Config) *Server {
	t.Helper()
	if ac.StoreDir == "" {
		ac.StoreDir = t.TempDir()
	}
	if ac.CallbackBackoff == 0 {
		ac.CallbackBackoff = 10 * time.Millisecond
	}
	srv, err := Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0", Stack: s,
		Backend:  backend.NewLocal(backend.LocalConfig{Log: testWriter{t}}),
		Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Gateway:  Config{MaxBody: 1 << 20}, Async: &ac})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

// callback is what a callback receiver got.
type callback struct {
	header http.Header
	body   string
}

// receiver is a callback URL on loopback: it records every callback and
// answers each with the status answer returns (200 when nil).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []callback
	answer func(n int) int
	ch     chan callback
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{answer: answer, ch: make(chan callback, 10000)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		c := callback{header: req.Header.Clone(), body: string(b)}
		r.mu.Lock()
		r.got = append(r.got, c)
		n := len(r.got)
		r.mu.Unlock()
		status := http.StatusOK
		if r.answer != nil {
			status = r.answer(n)
		}
		w.WriteHeader(status)
		if status < 300 {
			r.ch <- c
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// next waits for the next callback the receiver accepted.
func (r *receiver) next(t *testing.T) callback {
	t.Helper()
	select {
	case c := <-r.ch:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no callback within 30s")
		return callback{}
	}
}

func postAsync(t *testing.T, url, body, cb string) (int, string) {
	t.Helper()
	hdr := map[string]string{}
	if cb != "" {
		hdr[async.CallbackHeader] = cb
	}
	code, msg, h := do(t, http.MethodPost, url, body, hdr)
	if code == http.StatusAccepted {
		return code, h.Get(callid.Header)
	}
	return code, msg
}

func TestAsyncInvocationCallsBackWithOpenFaaSHeaders(t *testing.T) {
	srv := startAsyncGateway(t, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "upper", "upper")}}, async.Config{})
	rcv := newReceiver(t, nil)
	code, id := postAsync(t, srv.URL()+"/async-function/upper.openfaas-fn/some/path", "hello", rcv.URL)
	if code != http.StatusAccepted || id == "" {
		t.Fatalf("async invoke: %d %q, want 202 with an X-Call-Id", code, id)
	}
	c := rcv.next(t)
	if c.body != "HELLO" {
		t.Errorf("callback body %q, want the function's answer HELLO", c.body)
	}
	for k, want := range map[string]string{callid.Header: id, async.StatusHeader: "200", async.FunctionHeader: "upper"} {
		if got := c.header.Get(k); got != want {
			t.Errorf("callback header %s = %q, want %q", k, got, want)
		}
	}
	if d, err := strconv.ParseFloat(c.header.Get(async.DurationHeader), 64); err != nil || d <= 0 {
		t.Errorf("callback %s = %q, want a positive duration", async.DurationHeader, c.header.Get(async.DurationHeader))
	}
	// A client's own call ID is kept; bad requests are refused at once.
	_, _, h := do(t, http.MethodPost, srv.URL()+"/async-function/upper", "x", map[string]string{callid.Header: "my-call-1"})
	if got := h.Get(callid.Header); got != "my-call-1" {
		t.Errorf("X-Call-Id %q, want the client's my-call-1", got)
	}
	for _, c := range []struct {
		method, path, cb string
		want             int
	}{
		{http.MethodPost, "/async-function/nope", "", http.StatusNotFound},
		{http.MethodPost, "/async-function/upper", "ftp://x", http.StatusBadRequest},
		{http.MethodPost, "/async-function/upper", "not a url", http.StatusBadRequest},
		{http.MethodGet, "/async-function/upper", "", http.StatusMethodNotAllowed},
	} {
		hdr := map[string]string{}
		if c.cb != "" {
			hdr[async.CallbackHeader] = c.cb
		}
		if code, msg, _ := do(t, c.method, srv.URL()+c.path, "x", hdr); code != c.want || msg == "" {
			t.Errorf("%s %s (callback %q): %d %q, want %d with a reason", c.method, c.path, c.cb, code, msg, c.want)
		}
	}
	if code, msg, _ := do(t, http.MethodPost, srv.URL()+"/async-function/upper", strings.Repeat("x", 2<<20), nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d %q, want 413", code, msg)
	}
}

// metricValue reads one series from the gateway's /metrics.
func metricValue(t *testing.T, srv *Server, series string) float64 {
	t.Helper()
	_, body, _ := do(t, http.MethodGet, srv.URL()+"/metrics", "", nil)
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return 0
}

// A callback that fails is retried with backoff up to the bound, then
// given up and counted; one that fails once is delivered on its retry.
// Either way the job is acknowledged: the queue ends empty.
func TestAsyncCallbackIsRetriedThenGivenUpAfterTheBound(t *testing.T) {
	srv := startAsyncGateway(t, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}},
		async.Config{CallbackRetries: 2})
	failing := newReceiver(t, func(int) int { return http.StatusInternalServerError })
	if code, msg := postAsync(t, srv.URL()+"/async-function/echo", "a", failing.URL); code != http.StatusAccepted {
		t.Fatalf("%d %s", code, msg)
	}
	waitUntil(t, "the callback given up", func() bool {
		return metricValue(t, srv, `gantry_async_callbacks_total{outcome="given_up"}`) == 1
	})
	if n := failing.count(); n != 3 {
		t.Errorf("%d callback attempts, want 3 (the first and 2 retries)", n)
	}
	once := newReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	_, id := postAsync(t, srv.URL()+"/async-function/echo", "b", once.URL)
	if c := once.next(t); c.header.Get(callid.Header) != id || c.body != "b" {
		t.Errorf("retried callback %q for %s, want b for %s", c.body, c.header.Get(callid.Header), id)
	}
	if n := once.count(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	// A receiver that refuses with a 4xx is not retried.
	refusing := newReceiver(t, func(int) int { return http.StatusNotFound })
	postAsync(t, srv.URL()+"/async-function/echo", "c", refusing.URL)
	waitUntil(t, "the refused callback given up", func() bool {
		return metricValue(t, srv, `gantry_async_callbacks_total{outcome="given_up"}`) == 2
	})
	if n := refusing.count(); n != 1 {
		t.Errorf("%d attempts at a receiver answering 404, want 1", n)
	}
	waitUntil(t, "the queue empty", func() bool {
		n, err := srv.queue.Depth(context.Background())
		return err == nil && n == 0
	})
}

// blockingReceiver holds every callback until release is closed, so the
// jobs stay unacknowledged in the queue.
func blockingReceiver(t *testing.T) (*receiver, chan struct{}) {
	release := make(chan struct{})
	r := newReceiver(t, func(int) int { <-release; return http.StatusOK })
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return r, release
}

// The queue holds at most its bound of jobs, waiting or running; past it
// the gateway answers 429 with Retry-After, and stores nothing.
func TestAsyncQueuePastItsBoundAnswers429(t *testing.T) {
	srv := startAsyncGateway(t, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}},
		async.Config{MaxJobs: 2, Workers: 1})
	rcv, release := blockingReceiver(t)
	for i := range 2 {
		if code, msg := postAsync(t, srv.URL()+"/async-function/echo", "x", rcv.URL); code != http.StatusAccepted {
			t.Fatalf("job %d: %d %s", i, code, msg)
		}
	}
	code, msg, h := do(t, http.MethodPost, srv.URL()+"/async-function/echo", "x", map[string]string{async.CallbackHeader: rcv.URL})
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(msg, "full") {
		t.Fatalf("past the bound: %d %q (Retry-After %q), want 429 saying the queue is full", code, msg, h.Get("Retry-After"))
	}
	if v := metricValue(t, srv, `gantry_async_refused_total{reason="full"}`); v != 1 {
		t.Errorf("refused{full} = %v, want 1", v)
	}
	close(release)
	for range 2 {
		rcv.next(t)
	}
	waitUntil(t, "room again", func() bool {
		n, err := srv.queue.Depth(context.Background())
		return err == nil && n == 0
	})
	if code, msg := postAsync(t, srv.URL()+"/async-function/echo", "x", rcv.URL); code != http.StatusAccepted {
		t.Errorf("after the queue emptied: %d %s, want 202", code, msg)
	}
}

// Workers pull the more critical band first: with the one worker busy,
// jobs of a critical function queued after a less critical one's run
// before them.
func TestAsyncMoreCriticalFunctionsArePulledFirst(t *testing.T) {
	low, high := instanceFunction(t, "low", "echo"), instanceFunction(t, "high", "echo")
	high.Criticality = 90
	srv := startAsyncGateway(t, &stack.Stack{Functions: []stack.Function{low, high}}, async.Config{Workers: 1})
	blocker, release := blockingReceiver(t)
	postAsync(t, srv.URL()+"/async-function/low", "first", blocker.URL)
	waitUntil(t, "the worker busy with the first job", func() bool { return blocker.count() == 1 })
	rcv := newReceiver(t, nil)
	for i := range 3 {
		postAsync(t, srv.URL()+"/async-function/low", "low"+strconv.Itoa(i), rcv.URL)
	}
	for i := range 3 {
		postAsync(t, srv.URL()+"/async-function/high", "high"+strconv.Itoa(i), rcv.URL)
	}
	close(release)
	var order []string
	for range 6 {
		order = append(order, rcv.next(t).body)
	}
	if got := strings.Join(order, " "); got != "high0 high1 high2 low0 low1 low2" {
		t.Errorf("callbacks in order %s, want the critical function's three first, each band in order", got)
	}
}

// With --nats-url two gateways consume one stream on an external NATS
// server: jobs accepted by either are all delivered, once each.
func TestAsyncTwoGatewaysShareAnExternalNATS(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		JetStreamMaxStore: testMaxStore})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	s := &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}}
	a := startAsyncGateway(t, s, async.Config{URL: ns.ClientURL()})
	b := startAsyncGateway(t, s, async.Config{URL: ns.ClientURL()})
	rcv := newReceiver(t, nil)
	want := map[string]bool{}
	for i := range 20 {
		g := a
		if i%2 == 1 {
			g = b
		}
		code, id := postAsync(t, g.URL()+"/async-function/echo", strconv.Itoa(i), rcv.URL)
		if code != http.StatusAccepted {
			t.Fatalf("job %d: %d %s", i, code, id)
		}
		want[id] = true
	}
	for range 20 {
		id := rcv.next(t).header.Get(callid.Header)
		if !want[id] {
			t.Fatalf("callback for %q: not accepted, or delivered twice", id)
		}
		delete(want, id)
	}
}

// A job for a function that cannot run now (here one that never starts)
// is retried only until its async deadline: then its callback carries the
// gateway's failure and the reason, and the job leaves the queue, rather
// than being handed back every second for ever with no word to the client.
func TestAsyncJobForABrokenFunctionIsCalledBackAtItsDeadline(t *testing.T) {
	f := brokenFunction("broken")
	f.SLO = 200 * time.Millisecond
	f.AsyncDeadline = 2 * time.Second
	srv := startAsyncGateway(t, &stack.Stack{Functions: []stack.Function{f}}, async.Config{})
	rcv := newReceiver(t, nil)
	code, id := postAsync(t, srv.URL()+"/async-function/broken", "x", rcv.URL)
	if code != http.StatusAccepted {
		t.Fatalf("async invoke: %d %s", code, id)
	}
	c := rcv.next(t)
	if c.header.Get(callid.Header) != id || c.header.Get(async.StatusHeader) != "503" ||
		!strings.Contains(c.body, "async deadline") || !strings.Contains(c.body, "exit code 127") {
		t.Fatalf("callback %v %q, want %s with 503, the deadline and the crash's reason", c.header, c.body, id)
	}
	waitUntil(t, "the queue empty", func() bool {
		n, err := srv.queue.Depth(context.Background())
		return err == nil && n == 0
	})
}

// Headers too large for a queued message (a callback URL of 100 KB) are
// refused 413 with the reason before anything is stored, not 503 "queue
// unavailable", which a client would retry for ever.
func TestAsyncHeadersTooLargeForTheQueueAre413(t *testing.T) {
	srv := startAsyncGateway(t, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}}, async.Config{})
	long := "http://127.0.0.1:1/" + strings.Repeat("a", 100<<10)
	code, msg := postAsync(t, srv.URL()+"/async-function/echo", "x", long)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "headers") {
		t.Fatalf("%d %.300q, want 413 naming the headers", code, msg)
	}
	code, msg, _ = do(t, http.MethodPost, srv.URL()+"/async-function/echo", "x", map[string]string{"X-Big": strings.Repeat("b", 70<<10)})
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 70 KB header: %d %.300q, want 413", code, msg)
	}
	if n, err := srv.queue.Depth(context.Background()); err != nil || n != 0 {
		t.Fatalf("queue depth %d (%v), want nothing stored", n, err)
	}
}

// A password in a callback URL is not written to the gateway's log when
// the callback fails and is retried or given up.
func TestAsyncCallbackPasswordStaysOutOfTheLog(t *testing.T) {
	var logged syncBuffer
	s := &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}}
	ac := async.Config{StoreDir: t.TempDir(), CallbackBackoff: 10 * time.Millisecond, CallbackRetries: 1}
	srv, err := Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0", Stack: s,
		Backend:  backend.NewLocal(backend.LocalConfig{Log: testWriter{t}}),
		Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Gateway:  Config{MaxBody: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logged, nil))}, Async: &ac})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	failing := newReceiver(t, func(int) int { return http.StatusInternalServerError })
	cb := strings.Replace(failing.URL, "http://", "http://hook:hunter2@", 1)
	if code, msg := postAsync(t, srv.URL()+"/async-function/echo", "x", cb); code != http.StatusAccepted {
		t.Fatalf("%d %s", code, msg)
	}
	waitUntil(t, "the callback given up", func() bool { return strings.Contains(logged.String(), "callback given up") })
	if out := logged.String(); strings.Contains(out, "hunter2") || !strings.Contains(out, "hook:xxxxx@") {
		t.Fatalf("the log shows the callback's password, or not the redacted URL:\n%s", out)
	}
}

// While the external NATS server is down an async request is refused at
// once with 503 and its X-Call-Id, and is never stored: before, nats.go
// buffered it, the client was told 503 "did not store" after 10 s, and
// the job was stored and run once the server came back.
func TestAsyncRefusedWhileNATSIsDownIsNeverStored(t *testing.T) {
	store := t.TempDir()
	startNATS := func(port int) *server.Server {
		ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: store, NoSigs: true, NoLog: true,
			JetStreamMaxStore: testMaxStore})
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		if !ns.ReadyForConnections(30 * time.Second) {
			t.Fatal("NATS server not ready")
		}
		return ns
	}
	ns := startNATS(-1)
	port := ns.Addr().(*net.TCPAddr).Port
	s := &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}}
	g := startAsyncGateway(t, s, async.Config{URL: ns.ClientURL()})
	rcv := newReceiver(t, nil)
	accepted := 0
	if code, msg := postAsync(t, g.URL()+"/async-function/echo", "before", rcv.URL); code != http.StatusAccepted {
		t.Fatalf("with the server up: %d %s", code, msg)
	}
	accepted++
	rcv.next(t)
	ns.Shutdown()
	// The gateway sees the connection close; until it does, a job may be
	// sent into it and answered "did not confirm" (nothing stores it).
	refused := 0
	for i := 0; refused == 0; i++ {
		if i == 100 {
			t.Fatal("no 503 in 100 requests with the NATS server down")
		}
		code, msg, h := do(t, http.MethodPost, g.URL()+"/async-function/echo", "while-down", map[string]string{async.CallbackHeader: rcv.URL})
		switch {
		case code == http.StatusAccepted:
			t.Fatalf("202 with the NATS server down")
		case code != http.StatusServiceUnavailable || h.Get(callid.Header) == "":
			t.Fatalf("with the server down: %d %q, X-Call-Id %q; want 503 naming the call", code, msg, h.Get(callid.Header))
		case strings.Contains(msg, "did not store the request"):
			refused++
		case !strings.Contains(msg, "did not confirm"):
			t.Fatalf("503 %q: want it to say whether the job may be stored", msg)
		}
	}
	ns = startNATS(port)
	t.Cleanup(ns.Shutdown)
	// Once reconnected, a job is accepted again; anything buffered while
	// the server was down would be stored before it.
	waitUntil(t, "a job accepted after the server came back", func() bool {
		code, _ := postAsync(t, g.URL()+"/async-function/echo", "after", rcv.URL)
		return code == http.StatusAccepted
	})
	accepted++
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), async.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != uint64(accepted) {
		t.Fatalf("the stream stored %d jobs, want the %d accepted (a refused one was stored)", info.State.LastSeq, accepted)
	}
}

// testMaxStore is the JetStream store an external test server offers. Left
// out, the server offers a share of the disk's free space, and refuses the
// stream's 1 GiB bound ("insufficient storage resources") on a machine
// with little free: the tests store a few KiB.
const testMaxStore = 4 << 30

// A second signal ends the wait for async jobs too: a job held by an
// instance that is still starting goes back to the queue at once, rather
// than holding the hurried gateway until the start times out.
func TestHurriedShutdownDoesNotWaitForAsyncJobs(t *testing.T) {
	f := stack.Function{Name: "never", Command: "sleep 600", SizeSensitive: true}
	f.Defaults()
	srv := startAsyncGateway(t, &stack.Stack{Functions: []stack.Function{f}}, async.Config{})
	if code, msg := postAsync(t, srv.URL()+"/async-function/never", "x", ""); code != http.StatusAccepted {
		t.Fatalf("async: %d %s", code, msg)
	}
	// The job runs: its instance is starting, and never gets ready.
	waitUntil(t, "the job waiting on a start", func() bool {
		st, _ := srv.D.Function("never")
		return st.Starting > 0 && st.Queued > 0
	})
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	srv.Hurry()
	// Far below the 30 s start timeout, which it waited for before.
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the hurried shutdown still waits for the async job after 15s")
	}
}

// An async client's X-Call-Id makes its retry safe (stored once): one the
// gateway would replace, or two of them, is refused with the reason and
// nothing stored, not swapped for a fresh identity the client never sees
// until the 202.
func TestAsyncCallIDThatWouldBeReplacedIsRefused(t *testing.T) {
	srv := startAsyncGateway(t, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}}, async.Config{})
	for _, ids := range [][]string{{"has space"}, {strings.Repeat("a", callid.MaxLen+1)}, {"one", "two"}, {"é"}} {
		req, err := http.NewRequest(http.MethodPost, srv.URL()+"/async-function/echo", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header[callid.Header] = ids
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "X-Call-Id must be given once") {
			t.Errorf("X-Call-Id %q: %d %q, want 400 with the reason", ids, resp.StatusCode, body)
		}
	}
	if n, err := srv.queue.Depth(context.Background()); err != nil || n != 0 {
		t.Fatalf("queue depth %d (%v), want nothing stored", n, err)
	}
	if code, id := postAsync(t, srv.URL()+"/async-function/echo", "x", ""); code != http.StatusAccepted || id == "" {
		t.Fatalf("without X-Call-Id: %d %q, want 202 with one the gateway set", code, id)
	}
}
