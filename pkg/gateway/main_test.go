package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// The test binary doubles as a function instance: run with
// GANTRY_TEST_INSTANCE set, it serves the instance contract on $PORT.
func TestMain(m *testing.M) {
	if mode := os.Getenv("GANTRY_TEST_INSTANCE"); mode == "hogchild" {
		hogMemory()
		return
	} else if mode != "" {
		serveInstance(mode)
		return
	}
	if dir := os.Getenv(testGatewayEnv); dir != "" {
		serveTestGateway(dir)
		return
	}
	if state := os.Getenv("GANTRY_TEST_ASYNC_GATEWAY_STATE"); state != "" {
		serveAsyncTestGateway(state) // a gateway the durability test kills
		return
	}
	os.Exit(m.Run())
}

func serveInstance(mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exitWithTestGateway()
	var posts, inFlight, most atomic.Int64
	var stuck atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return // the health check
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen-Call-Id", r.Header.Get("X-Call-Id"))
		switch mode {
		case "refuse":
			// Answers its first request and closes its listener: later
			// connections are refused, the process stays.
			if posts.Add(1) == 1 {
				w.Header().Set("Connection", "close")
				ln.Close()
			}
		case "count":
			// Counts the requests in flight in this process and writes
			// the most it saw to $GANTRY_TEST_MAXFILE: the instance's own
			// view of its concurrency, whatever the gateway believes.
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			_ = os.WriteFile(os.Getenv("GANTRY_TEST_MAXFILE"), []byte(fmt.Sprint(most.Load())), 0o600)
			time.Sleep(400 * time.Millisecond)
			inFlight.Add(-1)
		case "hang":
			// The process that claims $GANTRY_TEST_FLAKY first with its
			// first request wedges: that request and every later one
			// never end, while the health check still answers (as a
			// watchdog in front of a stuck worker does). Other processes
			// answer.
			if posts.Add(1) == 1 && claim(os.Getenv("GANTRY_TEST_FLAKY")) {
				stuck.Store(true)
			}
			if stuck.Load() {
				time.Sleep(time.Hour)
			}
		case "stuckone":
			// "stuck" never ends; "slowN" takes N ms; anything else
			// echoes at once. The health check answers throughout.
			if string(body) == "stuck" {
				time.Sleep(time.Hour)
			}
			if ms, err := strconv.Atoi(strings.TrimPrefix(string(body), "slow")); err == nil {
				time.Sleep(time.Duration(ms) * time.Millisecond)
			}
		case "crash":
			os.Exit(3)
		case "flaky":
			// In the one process that creates $GANTRY_TEST_FLAKY first,
			// the first request's connection is reset without an answer;
			// the process stays healthy and answers every later one.
			if posts.Add(1) == 1 && claim(os.Getenv("GANTRY_TEST_FLAKY")) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					if tc, ok := conn.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					conn.Close()
				}
				return
			}
		case "slow":
			time.Sleep(300 * time.Millisecond)
		case "upper":
			body = bytes.ToUpper(body)
		case "hog":
			// Starts a child holding the body's MiB; answers once
			// the child ends or after 10 s.
			if mb := string(body); mb != "0" {
				self, _ := os.Executable()
				child := exec.Command(self)
				child.Env = append(os.Environ(), "GANTRY_TEST_INSTANCE=hogchild", "GANTRY_TEST_HOG_MB="+mb)
				if err := child.Start(); err == nil {
					done := make(chan struct{})
					go func() { _ = child.Wait(); close(done) }()
					select {
					case <-done:
					case <-time.After(10 * time.Second):
					}
				}
			}
			body = []byte("survived")
		case "say":
			// Prints the body on stdout and stderr, for the logs.
			fmt.Printf("said %s\n", body)
			fmt.Fprintf(os.Stderr, "warned %s\n", body)
		case "secret":
			// Answers "MODE:VALUE" of the secret the body names, read
			// where the gateway says this instance's secrets are.
			dir := os.Getenv(SecretsDirEnv)
			st, err := os.Stat(dir)
			v, err2 := os.ReadFile(filepath.Join(dir, string(body)))
			if err != nil || err2 != nil {
				http.Error(w, fmt.Sprint(err, err2), http.StatusNotFound)
				return
			}
			body = []byte(fmt.Sprintf("%o:%s", st.Mode().Perm(), v))
		}
		w.Header().Set(OutputSizeHeader, fmt.Sprint(len(body)))
		_, _ = w.Write(body)
	})
	_ = http.Serve(ln, h)
	if mode == "refuse" {
		time.Sleep(time.Hour) // listener closed, process alive: connections are refused
	}
}

// hogMemory holds $GANTRY_TEST_HOG_MB MiB, resident, for 30 s.
func hogMemory() {
	var mb int
	fmt.Sscan(os.Getenv("GANTRY_TEST_HOG_MB"), &mb)
	hold := make([]byte, mb<<20)
	for i := 0; i < len(hold); i += 4096 {
		hold[i] = 1
	}
	time.Sleep(30 * time.Second)
	hold[0]++
}

// claim reports whether this process created the file at path first.
func claim(path string) bool {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// instanceFunction declares a function whose instances are this test
// binary in the given mode.
func instanceFunction(t *testing.T, name, mode string) stack.Function {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := stack.Function{Name: name, Command: "'" + self + "'", Env: map[string]string{"GANTRY_TEST_INSTANCE": mode},
		SizeSensitive: true}
	f.Defaults()
	return f
}

// startGateway serves a stack on loopback with the real process runtime.
func startGateway(t *testing.T, s *stack.Stack, auth *Auth) *Server {
	t.Helper()
	return startGatewayWith(t, s, func(c *ServerConfig) { c.Gateway.Auth = auth })
}

// startGatewayWith is startGateway with the configuration edited first.
func startGatewayWith(t *testing.T, s *stack.Stack, edit func(*ServerConfig)) *Server {
	t.Helper()
	cfg := ServerConfig{Addr: "127.0.0.1:0", Stack: s,
		Backend:  backend.NewLocal(backend.LocalConfig{Log: testWriter{t}}),
		Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Gateway:  Config{MaxBody: 1 << 20}}
	edit(&cfg)
	srv, err := Start(context.Background(), cfg)
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

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// do sends a request and returns the status, body and headers.
func do(t *testing.T, method, url string, body string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
