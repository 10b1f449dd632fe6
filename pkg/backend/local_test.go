package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

// The test binary doubles as an instance when GANTRY_TEST_INSTANCE is set.
func TestMain(m *testing.M) {
	switch os.Getenv("GANTRY_TEST_INSTANCE") {
	case "":
		os.Exit(m.Run())
	case "exit":
		os.Exit(4)
	case "socket", "hang":
		socketInstance(os.Getenv("GANTRY_TEST_INSTANCE"))
	case "wrongport":
		// Its own port, as a program that ignores $PORT.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(1)
		}
		_ = http.Serve(ln, http.NotFoundHandler())
	case "status500", "status503":
		code := 500
		if os.Getenv("GANTRY_TEST_INSTANCE") == "status503" {
			code = 503
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
		if err != nil {
			os.Exit(1)
		}
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
	default:
		ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
		if err != nil {
			os.Exit(1)
		}
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s", os.Getenv("GANTRY_FUNCTION_NAME"), os.Getenv("GREETING"))
		}))
	}
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	ready  []Instance
	failed []error
	exited map[string]error
	ch     chan string
}

func newRecorder() *recorder { return &recorder{exited: map[string]error{}, ch: make(chan string, 64)} }

func (r *recorder) Ready(inst Instance) {
	r.mu.Lock()
	r.ready = append(r.ready, inst)
	r.mu.Unlock()
	r.ch <- "ready"
}

func (r *recorder) Failed(_ string, err error) {
	r.mu.Lock()
	r.failed = append(r.failed, err)
	r.mu.Unlock()
	r.ch <- "failed"
}

func (r *recorder) Exited(inst Instance, err error) {
	r.mu.Lock()
	r.exited[inst.ID] = err
	r.mu.Unlock()
	r.ch <- "exited"
}

func (r *recorder) next(t *testing.T) string {
	t.Helper()
	select {
	case e := <-r.ch:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20s")
		return ""
	}
}

func instanceFn(t *testing.T, name, mode string) stack.Function {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return stack.Function{Name: name, Command: "'" + self + "'",
		Env: map[string]string{"GANTRY_TEST_INSTANCE": mode, "GREETING": "hello"}}
}

func newTestLocal(t *testing.T, cfg LocalConfig) (*Local, *recorder) {
	t.Helper()
	l := NewLocal(cfg)
	rec := newRecorder()
	l.Attach(rec)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Close(ctx)
	})
	return l, rec
}

func TestStartedInstanceIsReadyOnItsOwnPortWithItsEnvironment(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{})
	if err := l.Deploy(context.Background(), instanceFn(t, "greet", "serve")); err != nil {
		t.Fatal(err)
	}
	l.Start("greet", 2)
	for range 2 {
		if e := rec.next(t); e != "ready" {
			t.Fatalf("got %s", e)
		}
	}
	if rec.ready[0].Addr == rec.ready[1].Addr || rec.ready[0].ColdStart <= 0 {
		t.Fatalf("instances %+v", rec.ready)
	}
	resp, err := http.Post("http://"+rec.ready[0].Addr+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body [64]byte
	n, _ := resp.Body.Read(body[:])
	if got := string(body[:n]); got != "greet hello" {
		t.Fatalf("instance answered %q", got)
	}
	l.Stop(rec.ready[0])
	if e := rec.next(t); e != "exited" || rec.exited[rec.ready[0].ID] != nil {
		t.Fatalf("stop: %s %v", e, rec.exited)
	}
}

func TestStartDelayCountsInTheColdStart(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{StartDelay: 300 * time.Millisecond})
	if err := l.Deploy(context.Background(), instanceFn(t, "slow", "serve")); err != nil {
		t.Fatal(err)
	}
	l.Start("slow", 1)
	if e := rec.next(t); e != "ready" || rec.ready[0].ColdStart < 300*time.Millisecond {
		t.Fatalf("%s %+v", e, rec.ready)
	}
}

func TestProcessThatExitsBeforeReadyFails(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{})
	if err := l.Deploy(context.Background(), instanceFn(t, "bad", "exit")); err != nil {
		t.Fatal(err)
	}
	l.Start("bad", 1)
	if e := rec.next(t); e != "failed" || !strings.Contains(rec.failed[0].Error(), "exited before ready") {
		t.Fatalf("%s %v", e, rec.failed)
	}
}

func TestKilledInstanceReportsAnUnexpectedExit(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{})
	if err := l.Deploy(context.Background(), instanceFn(t, "victim", "serve")); err != nil {
		t.Fatal(err)
	}
	l.Start("victim", 1)
	if e := rec.next(t); e != "ready" {
		t.Fatal(e)
	}
	l.mu.Lock()
	p := l.procs[rec.ready[0].ID]
	l.mu.Unlock()
	_ = p.cmd.Process.Kill()
	if e := rec.next(t); e != "exited" || rec.exited[rec.ready[0].ID] == nil {
		t.Fatalf("%s %v", e, rec.exited)
	}
}

func TestUndeployedOrUnknownFunctionsAreRefused(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{})
	if err := l.Deploy(context.Background(), stack.Function{Name: "img", Image: "x"}); !errors.Is(err, stack.ErrInvalid) {
		t.Fatalf("image-only function: %v", err)
	}
	l.Start("ghost", 1)
	if e := rec.next(t); e != "failed" || !errors.Is(rec.failed[0], ErrNotDeployed) {
		t.Fatalf("%s %v", e, rec.failed)
	}
	if err := l.Undeploy(context.Background(), "ghost"); !errors.Is(err, ErrNotDeployed) {
		t.Fatalf("undeploy: %v", err)
	}
}

func TestCommandNamingGantryRunsThisBinary(t *testing.T) {
	l := NewLocal(LocalConfig{Self: "/opt/my bin/gantry"})
	if got := l.command("gantry fn sentiment"); got != `'/opt/my bin/gantry' fn sentiment` {
		t.Fatalf("got %q", got)
	}
	if got := l.command("gantryx run"); got != "gantryx run" {
		t.Fatalf("got %q", got)
	}
}

// An instance that never becomes ready fails its start with what the
// readiness check saw, not only that the deadline passed.
func TestStartThatNeverGetsReadySaysWhatTheCheckSaw(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{ReadyTimeout: 300 * time.Millisecond})
	if err := l.Deploy(context.Background(), stack.Function{Name: "mute", Command: "echo waiting >&2; exec sleep 1000"}); err != nil {
		t.Fatal(err)
	}
	l.Start("mute", 1)
	if e := rec.next(t); e != "failed" {
		t.Fatalf("got %s, want failed", e)
	}
	msg := rec.failed[0].Error()
	if !strings.Contains(msg, "connection refused (nothing listening)") || !strings.Contains(msg, "last stderr: waiting") {
		t.Fatalf("reason %q, want what the check saw and the stderr", msg)
	}
}

// A start that cannot succeed fails as soon as that is certain, not at the
// ready timeout: a health path that answers 500 on every check, a program
// that listens on a port of its own instead of $PORT. One that answers 503
// (not ready yet) is waited for until the timeout.
func TestCertainlyBrokenStartFailsBeforeTheReadyTimeout(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{ReadyTimeout: 10 * time.Minute})
	for _, c := range []struct{ mode, want string }{
		{"status500", "answered status 500 Internal Server Error on every check"},
		{"wrongport", "not on $PORT"},
	} {
		if err := l.Deploy(context.Background(), instanceFn(t, c.mode, c.mode)); err != nil {
			t.Fatal(err)
		}
		l.Start(c.mode, 1)
		if e := rec.next(t); e != "failed" {
			t.Fatalf("%s: got %s, want failed", c.mode, e)
		}
		if msg := rec.failed[len(rec.failed)-1].Error(); !strings.Contains(msg, c.want) {
			t.Fatalf("%s: reason %q, want %q", c.mode, msg, c.want)
		}
	}
	l2, rec2 := newTestLocal(t, LocalConfig{ReadyTimeout: time.Second})
	if err := l2.Deploy(context.Background(), instanceFn(t, "starting", "status503")); err != nil {
		t.Fatal(err)
	}
	l2.Start("starting", 1)
	if e := rec2.next(t); e != "failed" || !strings.Contains(rec2.failed[0].Error(), "not ready within 1s") {
		t.Fatalf("got %s %v, want the ready timeout", e, rec2.failed)
	}
}

// A port another process takes between the gateway picking it and the
// instance binding it (five gateways on one machine do) is not the
// instance's: the other process's answer does not make the instance ready,
// and the start is launched again on another port instead of failing.
func TestStartWhosePortAnotherProcessTookIsLaunchedAgain(t *testing.T) {
	foreign, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = http.Serve(foreign, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "foreign") }))
	}()
	t.Cleanup(func() { foreign.Close() })
	l, rec := newTestLocal(t, LocalConfig{})
	var mu sync.Mutex
	taken := true
	l.pickPort = func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if taken {
			taken = false
			return foreign.Addr().(*net.TCPAddr).Port, nil
		}
		return freePort()
	}
	if err := l.Deploy(context.Background(), instanceFn(t, "f", "serve")); err != nil {
		t.Fatal(err)
	}
	l.Start("f", 1)
	if e := rec.next(t); e != "ready" {
		t.Fatalf("got %s %v, want ready", e, rec.failed)
	}
	if got := rec.ready[0].Addr; got == foreign.Addr().String() {
		t.Fatalf("ready on the foreign process's port %s", got)
	}
	resp, err := http.Post("http://"+rec.ready[0].Addr+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "f hello" {
		t.Fatalf("answer %q, want the instance's", body)
	}
}
