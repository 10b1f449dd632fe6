package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// brokenFunction is a function whose command does not exist: its shell
// exits 127 with "not found" on stderr before the instance is ready.
func brokenFunction(name string) stack.Function {
	f := stack.Function{Name: name, Command: "gantry-test-no-such-command", SizeSensitive: true}
	f.Defaults()
	return f
}

// A function that can never start answers 503 at once with the exit
// code and the instance's stderr, says so in its status and metrics, and
// serves once it is updated with a command that works.
func TestCrashLoopAnswers503WithTheExitReasonAndRecoversOnUpdate(t *testing.T) {
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{brokenFunction("broken")}}, nil)
	for i := range 3 {
		code, body, h := do(t, "POST", srv.URL()+"/function/broken", "x", nil)
		if code != 503 || !strings.Contains(body, "exit code 127") || !strings.Contains(body, "not found") {
			t.Fatalf("request %d: %d %q, want 503 with the exit code and stderr", i, code, body)
		}
		if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("request %d: Retry-After %q", i, h.Get("Retry-After"))
		}
	}
	st, _ := srv.D.Function("broken")
	if st.Stats.Spawned > 2 || st.Restarts < 1 {
		t.Fatalf("3 requests within the first back-off made %d starts (restarts %d), want at most 2", st.Stats.Spawned, st.Restarts)
	}
	code, body, _ := do(t, "GET", srv.URL()+"/system/function/broken", "", nil)
	var status functionStatus
	if err := json.Unmarshal([]byte(body), &status); err != nil || code != 200 {
		t.Fatalf("status: %d %s", code, body)
	}
	if (status.State != dispatch.StateBackOff && status.State != dispatch.StateFailed) || status.Restarts < 1 ||
		!strings.Contains(status.Reason, "exit code 127") {
		t.Fatalf("status %+v: want the crash loop's state, restarts and reason", status)
	}
	_, metrics, _ := do(t, "GET", srv.URL()+"/metrics", "", nil)
	for _, want := range []string{`gantry_function_restarts_total{function_name="broken.openfaas-fn"}`, `gantry_function_state{function_name="broken.openfaas-fn",state="` + status.State + `"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	fixed := instanceFunction(t, "x", "echo")
	dep, _ := json.Marshal(map[string]any{"service": "broken", "envProcess": fixed.Command, "envVars": fixed.Env})
	if code, body, _ := do(t, "PUT", srv.URL()+"/system/functions", string(dep), nil); code != 202 {
		t.Fatalf("update: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/broken", "fixed", nil); code != 200 || body != "fixed" {
		t.Fatalf("after the update: %d %q, want served", code, body)
	}
}

// BenchmarkCrashLoop503 is the latency of the 503 a client gets from a
// function that can never start, while it backs off: each request goes
// through the whole gateway on loopback (one client, keep-alive).
//
//	go test -run '^$' -bench CrashLoop503 -benchtime 2000x ./pkg/gateway
func BenchmarkCrashLoop503(b *testing.B) {
	srv, err := Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0",
		Stack:    &stack.Stack{Functions: []stack.Function{brokenFunction("broken")}},
		Backend:  backend.NewLocal(backend.LocalConfig{}),
		Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Gateway:  Config{MaxBody: 1 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	url := srv.URL() + "/function/broken"
	post := func() int {
		resp, err := http.Post(url, "text/plain", strings.NewReader("x"))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	post() // the first start fails: the back-off begins
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if code := post(); code != http.StatusServiceUnavailable {
			b.Fatalf("HTTP %d, want 503", code)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
	st, _ := srv.D.Function("broken")
	b.ReportMetric(float64(st.Stats.Spawned), "starts")
}

// syncBuffer is a log sink the gateway's goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A POST an instance received and then reset is not sent again to
// another instance: the client gets 502 saying it may have run.
func TestDeliveredRequestIsNotRetriedUnlessIdempotent(t *testing.T) {
	f := instanceFunction(t, "flaky", "flaky")
	f.Env["GANTRY_TEST_FLAKY"] = filepath.Join(t.TempDir(), "claimed")
	f.MinScale, f.MaxScale = 2, 2
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{f}}, nil)
	waitUntil(t, "two instances ready", func() bool { st, _ := srv.D.Function("flaky"); return st.Available == 2 })
	code, body, _ := do(t, "POST", srv.URL()+"/function/flaky", "hello", nil)
	if code != 502 || !strings.Contains(body, "may have run") {
		t.Fatalf("reset after delivery: %d %q, want 502 saying it may have run", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/flaky", "again", nil); code != 200 || body != "again" {
		t.Fatalf("next request: %d %q", code, body)
	}
	if st, _ := srv.D.Function("flaky"); st.Stats.InstanceErrors != 1 || st.Stats.Accepted != 2 {
		t.Fatalf("stats %+v: want one instance error and no retry", st.Stats)
	}
}

// A request refused at connect was never delivered: it goes to another
// instance whatever the function, the retry is counted and logged with
// the call's X-Call-Id, which the gateway set, passed to the instance
// and returned.
func TestNeverDeliveredRequestIsRetriedAndLoggedWithItsCallID(t *testing.T) {
	f := instanceFunction(t, "refuse", "refuse")
	f.MinScale, f.MaxScale = 2, 2
	logs := &syncBuffer{}
	srv := startGatewayWith(t, &stack.Stack{Functions: []stack.Function{f}}, func(c *ServerConfig) {
		c.Gateway.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	waitUntil(t, "two instances ready", func() bool { st, _ := srv.D.Function("refuse"); return st.Available == 2 })
	code, _, h := do(t, "POST", srv.URL()+"/function/refuse", "first", nil)
	id := h.Get("X-Call-Id")
	if code != 200 || id == "" || h.Get("X-Seen-Call-Id") != id {
		t.Fatalf("first: %d, X-Call-Id %q, the instance saw %q; want 200 and one id on both", code, id, h.Get("X-Seen-Call-Id"))
	}
	// The instance that answered now refuses connections; it is the one
	// freed last, so the next request goes there first.
	code, body, h := do(t, "POST", srv.URL()+"/function/refuse", "second", map[string]string{"X-Call-Id": "client-chosen-42"})
	if code != 200 || body != "second" || h.Get("X-Call-Id") != "client-chosen-42" || h.Get("X-Seen-Call-Id") != "client-chosen-42" {
		t.Fatalf("second: %d %q, ids %q/%q; want 200 with the client's id kept", code, body, h.Get("X-Call-Id"), h.Get("X-Seen-Call-Id"))
	}
	_, metrics, _ := do(t, "GET", srv.URL()+"/metrics", "", nil)
	if !strings.Contains(metrics, `gantry_instance_retries_total{function_name="refuse.openfaas-fn"} 1`) {
		t.Fatal("the retry is not counted")
	}
	if l := logs.String(); !strings.Contains(l, "retrying on another instance") || !strings.Contains(l, "X-Call-Id=client-chosen-42") {
		t.Fatalf("the retry is not logged with its call id:\n%s", l)
	}
	if code, _, h := do(t, "POST", srv.URL()+"/function/missing", "", nil); code != 404 || h.Get("X-Call-Id") == "" {
		t.Fatalf("a refused call: %d, X-Call-Id %q; want 404 with an id", code, h.Get("X-Call-Id"))
	}
}

// A client that hangs up does not free its slot: the gateway reads the
// instance's answer to its end first, so the next request waits for it
// and the instance never runs more than its concurrency of 1, by its own
// count.
func TestClientDisconnectKeepsTheSlotUntilTheInstanceAnswers(t *testing.T) {
	f := instanceFunction(t, "count", "count")
	maxFile := filepath.Join(t.TempDir(), "max")
	f.Env["GANTRY_TEST_MAXFILE"] = maxFile
	f.MinScale, f.MaxScale = 1, 1
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{f}}, nil)
	waitUntil(t, "the instance ready", func() bool { st, _ := srv.D.Function("count"); return st.Available == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitUntil(t, "the first request running", func() bool { st, _ := srv.D.Function("count"); return st.Running == 1 })
		cancel() // the client hangs up while the instance works (400 ms)
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/function/count", strings.NewReader("a"))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request outlived its client")
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/count", "b", nil); code != 200 || body != "b" {
		t.Fatalf("next request: %d %q", code, body)
	}
	most, err := os.ReadFile(maxFile)
	if err != nil || string(most) != "1" {
		t.Fatalf("the instance ran %q requests at once (%v), want 1", most, err)
	}
	st, _ := srv.D.Function("count")
	if st.Stats.Completed != 2 || st.Stats.Abandoned != 0 {
		t.Fatalf("stats %+v: want both executions completed, the first answered to nobody", st.Stats)
	}
}

// A concurrency-1 instance that wedges costs the one request it hung on:
// answered 504 at the timeout, its slot kept until the grace period ends,
// then the instance is replaced and the requests queued behind it are
// served by the replacement.
func TestHungInstanceCostsOneRequestAndIsReplaced(t *testing.T) {
	f := instanceFunction(t, "hang", "hang")
	f.Env["GANTRY_TEST_FLAKY"] = filepath.Join(t.TempDir(), "claimed")
	f.MinScale, f.MaxScale = 1, 1
	f.Timeout = time.Second
	srv := startGatewayWith(t, &stack.Stack{Functions: []stack.Function{f}}, func(c *ServerConfig) {
		c.Gateway.HungGrace = 500 * time.Millisecond
	})
	waitUntil(t, "the instance ready", func() bool { st, _ := srv.D.Function("hang"); return st.Available == 1 })
	type answer struct {
		code int
		body string
	}
	first := make(chan answer, 1)
	go func() {
		code, body, _ := do(t, "POST", srv.URL()+"/function/hang", "first", nil)
		first <- answer{code, body}
	}()
	waitUntil(t, "the first request running", func() bool { st, _ := srv.D.Function("hang"); return st.Running == 1 })
	const behind = 4
	rest := make(chan answer, behind)
	for i := range behind {
		go func() {
			body := fmt.Sprint("next-", i)
			code, got, _ := do(t, "POST", srv.URL()+"/function/hang", body, nil)
			if got != body {
				code = -code
			}
			rest <- answer{code, got}
		}()
	}
	if a := <-first; a.code != 504 || !strings.Contains(a.body, "timeout") {
		t.Fatalf("the hung request: %d %q, want 504 with the reason", a.code, a.body)
	}
	for range behind {
		if a := <-rest; a.code != 200 {
			t.Fatalf("a request queued behind the hung one: %d %q, want 200 from the replacement", a.code, a.body)
		}
	}
	st, _ := srv.D.Function("hang")
	if st.Stats.TimedOut != 1 || st.Stats.Hung != 1 || st.Stats.Replaced != 1 || st.Stats.Completed != behind || st.Stats.Spawned != 2 {
		t.Fatalf("stats %+v: want one timeout, one hung instance replaced by one start, the rest completed", st.Stats)
	}
}

// An instance of concurrency above 1 that hangs on one request is taken
// out of rotation, and stopped only once the other requests it is running
// have ended: they are answered, not cut (before, each got 502 "failed
// after receiving the request" when the hung instance was stopped).
func TestHungInstanceFinishesItsOtherRequestsBeforeItStops(t *testing.T) {
	f := instanceFunction(t, "stuckone", "stuckone")
	f.MinScale, f.MaxScale, f.Concurrency = 1, 1, 4
	f.Timeout = 2 * time.Second
	be := newTestLocal(t)
	srv := startGatewayWith(t, &stack.Stack{Functions: []stack.Function{f}}, func(c *ServerConfig) {
		c.Backend = be
		c.Gateway.HungGrace = 500 * time.Millisecond
	})
	waitUntil(t, "the instance ready", func() bool { st, _ := srv.D.Function("stuckone"); return st.Available == 1 })
	stuck := make(chan int, 1)
	go func() { code, _, _ := do(t, "POST", srv.URL()+"/function/stuckone", "stuck", nil); stuck <- code }()
	waitUntil(t, "the stuck request running", func() bool { st, _ := srv.D.Function("stuckone"); return st.Running == 1 })
	// The others start before the instance is found hung (at its 2 s
	// timeout plus the 0.5 s grace) and end after it: 1.5 s each, within
	// their own timeout.
	time.Sleep(1200 * time.Millisecond)
	const others = 3
	codes := make(chan string, others)
	for i := range others {
		go func() {
			code, body, _ := do(t, "POST", srv.URL()+"/function/stuckone", "slow1500", nil)
			codes <- fmt.Sprint(i, ": ", code, " ", body)
		}()
	}
	if code := <-stuck; code != 504 {
		t.Fatalf("the stuck request: %d, want 504", code)
	}
	for range others {
		if got := <-codes; !strings.HasSuffix(got, ": 200 slow1500") {
			t.Errorf("a request running beside the stuck one: %s, want 200 slow1500", got)
		}
	}
	waitUntil(t, "the hung instance stopped, its replacement serving", func() bool {
		st, _ := srv.D.Function("stuckone")
		return st.Stats.Hung == 1 && st.Stats.Replaced == 1 && st.Available == 1 && be.Running(f.Ref()) == 1
	})
}

// describe's invocationCount counts every invocation answered, as
// OpenFaaS's does (it sums gateway_function_invocation_total over status
// codes): a crash-looping function's 503s too. Before, only the
// invocations an instance answered counted, so it said 0.
func TestInvocationCountCountsEveryAnsweredInvocation(t *testing.T) {
	echo := instanceFunction(t, "echo", "echo")
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{brokenFunction("broken"), echo}}, nil)
	for range 2 {
		if code, body, _ := do(t, "POST", srv.URL()+"/function/broken", "x", nil); code != 503 {
			t.Fatalf("broken: %d %q, want 503", code, body)
		}
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/echo", "x", nil); code != 200 {
		t.Fatalf("echo: %d %q", code, body)
	}
	for name, want := range map[string]float64{"broken": 2, "echo": 1} {
		code, body, _ := do(t, "GET", srv.URL()+"/system/function/"+name, "", nil)
		var st functionStatus
		if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
			t.Fatalf("describe %s: %d %s", name, code, body)
		}
		if st.InvocationCount != want {
			t.Errorf("%s: invocationCount %v, want %v", name, st.InvocationCount, want)
		}
	}
}

// A drain does not wait for an instance that hung on a request already
// answered 504: every client has its answer, so the gateway stops at once
// and the instance with it. Before, the drain waited for the exchange's
// grace period (HungGrace: 2 s by default; here longer than the test).
func TestDrainDoesNotWaitForAHungInstanceOnceItsClientIsAnswered(t *testing.T) {
	f := instanceFunction(t, "hang", "hang")
	f.Env["GANTRY_TEST_FLAKY"] = filepath.Join(t.TempDir(), "claimed")
	f.MinScale, f.MaxScale = 1, 1
	f.Timeout = 500 * time.Millisecond
	srv, err := Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0",
		Stack:    &stack.Stack{Functions: []stack.Function{f}},
		Backend:  backend.NewLocal(backend.LocalConfig{Log: testWriter{t}}),
		Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Gateway:  Config{MaxBody: 1 << 20, HungGrace: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/hang", "x", nil); code != 504 {
		t.Fatalf("the hung request: %d %q, want 504", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		srv.Hurry()
		<-done
		t.Fatal("the drain waited for the hung instance's exchange, whose client had its 504")
	}
	// The instance is out of rotation from the drain's start (the drain
	// may still send queued requests to others), not freed for more.
	if st, _ := srv.D.Function("hang"); st.Stats.TimedOut != 1 || st.Stats.Hung != 1 || st.Stats.Abandoned != 0 {
		t.Fatalf("stats %+v: want the timeout, its instance taken as hung when the drain began", st.Stats)
	}
}
