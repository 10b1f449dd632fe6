package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/async"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/callid"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

// The durability test: async requests accepted by a gateway that is
// SIGKILLed in the middle and restarted with the same command line are
// every one delivered to their callback, at least once; duplicates are
// counted by X-Call-Id. CI runs 200 requests; the figures in
// docs/platform.md come from
//
//	GANTRY_ASYNC_DURABILITY_N=1000 go test -run TestAsyncJobsSurviveSIGKILL -v ./pkg/gateway
func TestAsyncJobsSurviveSIGKILL(t *testing.T) {
	n := 200
	if v := os.Getenv("GANTRY_ASYNC_DURABILITY_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 || n > 100_000 {
			t.Fatalf("GANTRY_ASYNC_DURABILITY_N=%q must be an integer in [2, 100000]", v)
		}
	}
	state, addr := t.TempDir(), freeAddr(t)
	rcv := newReceiver(t, nil)
	g := startChildGateway(t, state, addr)
	base := "http://" + addr
	ids := make([]string, 0, n)
	start := time.Now()
	post := func() {
		code, id := postAsync(t, base+"/async-function/echo", strconv.Itoa(len(ids)), rcv.URL)
		if code != http.StatusAccepted {
			t.Fatalf("request %d: %d %s", len(ids), code, id)
		}
		ids = append(ids, id)
	}
	for len(ids) < n/2 {
		post()
	}
	// Killed right after a 202: nothing it acknowledged may be lost.
	if err := g.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = g.Wait()
	before := rcv.count()
	startChildGateway(t, state, addr)
	for len(ids) < n {
		post()
	}
	seen := map[string]int{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(seen) < n {
		select {
		case c := <-rcv.ch:
			seen[c.header.Get(callid.Header)]++
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%d of %d accepted requests delivered within 2 minutes", len(seen), n)
		}
	}
	took := time.Since(start)
	time.Sleep(200 * time.Millisecond) // late duplicates, if any, are counted too
	for len(rcv.ch) > 0 {
		seen[(<-rcv.ch).header.Get(callid.Header)]++
	}
	dups := 0
	for _, id := range ids {
		if seen[id] == 0 {
			t.Errorf("call %s accepted, never delivered", id)
		}
		dups += max(0, seen[id]-1)
	}
	if len(seen) != n {
		t.Errorf("%d distinct call IDs delivered, %d accepted", len(seen), n)
	}
	t.Logf("accepted %d (SIGKILL after %d, %d delivered before the kill), delivered %d distinct, %d duplicates, all in %v",
		n, n/2, before, len(seen), dups, took.Round(time.Millisecond))
}

// freeAddr is a loopback address nothing listens on, for the child
// gateway to take on both of its runs.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startChildGateway runs this test binary as a gateway (serveAsyncTestGateway)
// and waits until it serves.
func startChildGateway(t *testing.T, state, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GANTRY_TEST_ASYNC_GATEWAY_STATE="+state, "GANTRY_TEST_GATEWAY_ADDR="+addr)
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(stop)
	waitUntil(t, "the child gateway serving", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return cmd
}

// serveAsyncTestGateway is the child gateway: one echo function, the embedded
// queue in the state folder, jobs of a gateway that died delivered again
// after 2 s. It stops on SIGTERM.
func serveAsyncTestGateway(state string) {
	self, _ := os.Executable()
	fn := stack.Function{Name: "echo", Command: "'" + self + "'", Env: map[string]string{"GANTRY_TEST_INSTANCE": "echo"}, SizeSensitive: true}
	fn.Defaults()
	dir, err := statedir.Open(state)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer dir.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := Start(ctx, ServerConfig{Addr: os.Getenv("GANTRY_TEST_GATEWAY_ADDR"), Stack: &stack.Stack{Functions: []stack.Function{fn}},
		Backend: backend.NewLocal(backend.LocalConfig{}), Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		State: dir, Async: &async.Config{AckWait: 2 * time.Second, CallbackBackoff: 10 * time.Millisecond}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
}
