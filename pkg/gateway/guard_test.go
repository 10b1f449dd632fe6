package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// bigHandler answers a POST with $n bytes, n from the query (an instance
// whose answers are large, for slow readers).
var bigHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	var n int
	_, _ = fmt.Sscan(r.URL.Query().Get("n"), &n)
	_, _ = w.Write(make([]byte, n))
})

// limitedServer is a gateway on loopback over in-process instances, with
// the given connection limits and a function "f" of the given timeout.
func limitedServer(tb testing.TB, lim Limits, timeout time.Duration) *Server {
	tb.Helper()
	f := plainFunction("f")
	f.Timeout = timeout
	f.MaxQueue = 1000
	f.Concurrency = 100
	// "short" has a short timeout, which bounds its request bodies.
	short := f
	short.Name, short.Timeout = "short", 2*time.Second
	srv, err := Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0", Stack: &stack.Stack{Functions: []stack.Function{f, short}},
		Backend: newInproc(bigHandler), Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Gateway: Config{MaxBody: 16 << 20}, Limits: lim})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

// cutWithin reports whether the gateway ends conn (EOF, reset, or an
// answer then EOF) within d; it reads and discards what comes.
func cutWithin(conn net.Conn, d time.Duration) (bool, string) {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	first, err := bufio.NewReader(conn).ReadString('\n')
	for err == nil {
		var b [4096]byte
		_, err = conn.Read(b[:])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, first
	}
	return true, first
}

// Slow headers, bodies that stall or trickle, and idle keep-alive
// connections are all cut by their bound, from many goroutines at once,
// while normal clients keep being served.
func TestSlowClientsAreCutWhileOthersAreServed(t *testing.T) {
	// Bounds short enough for a quick test, long enough that a normal
	// client on a loaded machine stays within them (a read whose deadline
	// has passed fails even when its bytes have arrived).
	lim := Limits{ReadHeader: 2 * time.Second, BodyIdle: time.Second,
		WriteExtra: time.Second, Idle: 2 * time.Second}
	srv := limitedServer(t, lim, 20*time.Second)
	addr := srv.Addr()
	const each = 15
	// Far beyond every bound above, and still within the test's patience
	// on a loaded machine: a connection held this long was never cut.
	const patience = 20 * time.Second

	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	failf := func(format string, a ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	dial := func() net.Conn {
		var d net.Dialer
		c, err := d.Dial("tcp", addr)
		if err != nil {
			failf("dial: %v", err)
			return nil
		}
		return c
	}
	slow := map[string]func(c net.Conn){
		// Headers that never end.
		"slow headers": func(c net.Conn) {
			fmt.Fprintf(c, "POST /function/f HTTP/1.1\r\nHost: x\r\n")
		},
		// A body that stops half-way: the idle gap cuts it, with a 408.
		"stalled body": func(c net.Conn) {
			fmt.Fprintf(c, "POST /function/f HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
		},
		// A body that trickles within the idle gap but never ends: the
		// function's timeout bounds the whole body.
		"trickled body": func(c net.Conn) {
			fmt.Fprintf(c, "POST /function/short HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
			go func() {
				for range 100 {
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
			}()
		},
		// A keep-alive connection left idle after its request.
		"idle keep-alive": func(c net.Conn) {
			fmt.Fprintf(c, "POST /function/f HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
		},
	}
	for kind, start := range slow {
		for range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := dial()
				if c == nil {
					return
				}
				defer c.Close()
				start(c)
				t0 := time.Now()
				defer func() { t.Logf("%s: cut after %v", kind, time.Since(t0).Round(time.Millisecond)) }()
				if ok, first := cutWithin(c, patience); !ok {
					failf("%s: connection still open after %v", kind, patience)
				} else if kind == "stalled body" && first != "" && !strings.Contains(first, "408") {
					failf("stalled body answered %q, want 408", first)
				}
			}()
		}
	}
	// Normal clients, all the while. Like any well-behaved client they
	// drop idle connections before the server does (keep-alive's race).
	client := &http.Client{Transport: &http.Transport{IdleConnTimeout: 500 * time.Millisecond, MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	stop := make(chan struct{})
	var served, failed atomic.Int64
	var nwg sync.WaitGroup
	for range 4 {
		nwg.Add(1)
		go func() {
			defer nwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Post(srv.URL()+"/function/f?n=10", "text/plain", strings.NewReader("hello"))
				if err != nil {
					failed.Add(1)
					failf("normal client: %v", err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					served.Add(1)
				} else {
					failed.Add(1)
					failf("normal client: status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	nwg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if served.Load() == 0 || failed.Load() > 0 {
		t.Errorf("normal clients: %d served, %d failed while slow clients were held", served.Load(), failed.Load())
	}
}

// BenchmarkSlowBodiesAgainstNormalClients holds 500 connections that send
// their bodies a byte at a time within the idle gap, for 30 s
// ($GANTRY_BENCH_HOLD to change), and reports the p99 of normal clients
// before and during, and their ratio (target: under 2).
//
//	go test -run '^$' -bench SlowBodies -benchtime 1x ./pkg/gateway
func BenchmarkSlowBodiesAgainstNormalClients(b *testing.B) {
	hold := 30 * time.Second
	if v := os.Getenv("GANTRY_BENCH_HOLD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		hold = d
	}
	srv := limitedServer(b, Limits{}, 2*hold)
	measure := func(d time.Duration) time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					t0 := time.Now()
					resp, err := http.Post(srv.URL()+"/function/f?n=10", "text/plain", strings.NewReader("hello"))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					lat = append(lat, time.Since(t0))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return percentile(lat, 0.99)
	}
	for range b.N {
		base := measure(hold / 3)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 500 {
			c, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				fmt.Fprintf(c, "POST /function/f HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := c.Write([]byte("x")); err != nil {
							return
						}
					}
				}
			}()
		}
		during := measure(hold)
		close(stop)
		wg.Wait()
		b.ReportMetric(float64(base.Microseconds())/1000, "p99-ms-before")
		b.ReportMetric(float64(during.Microseconds())/1000, "p99-ms-during")
		b.ReportMetric(float64(during)/float64(base), "p99-ratio")
	}
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// Clients that never read their answer, or read it a byte a second, are
// cut at the write bound (the function's timeout plus WriteExtra, from
// the first byte written) and then hold none of the gateway's
// goroutines, answers or connections, while normal clients keep being
// served.
func TestSlowReadersAreCutAtTheWriteBound(t *testing.T) {
	// "short" has a 2 s timeout: its answers get 2 s + 1 s to be read.
	lim := Limits{WriteExtra: time.Second}
	srv := limitedServer(t, lim, 20*time.Second)
	const bound = 3 * time.Second
	// More than the socket buffers take (the client's receive buffer is
	// kept small; the gateway's send buffer grows to 4 MiB at most, Linux's
	// tcp_wmem), so the gateway's writes block.
	const answer = 10 << 20
	// Warm up: the instance and a keep-alive connection exist before the
	// baseline.
	if code, _, _ := do(t, "POST", srv.URL()+"/function/short?n=10", "x", nil); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
	type slowReader struct {
		c    *net.TCPConn
		sent time.Time
	}
	const never, trickle = 2, 2
	var readers []slowReader
	for range never + trickle {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		tc := c.(*net.TCPConn)
		defer tc.Close()
		_ = tc.SetReadBuffer(4096)
		fmt.Fprintf(tc, "POST /function/short?n=%d HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", answer)
		readers = append(readers, slowReader{c: tc, sent: time.Now()})
	}
	// A byte a second from some, none from the others, until well past
	// the bound; meanwhile normal clients are served.
	var wg sync.WaitGroup
	for _, r := range readers[never:] {
		wg.Go(func() {
			var b [1]byte
			for time.Since(r.sent) < bound+time.Second {
				if _, err := r.c.Read(b[:]); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
		})
	}
	client := &http.Client{Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	served := 0
	for time.Since(readers[len(readers)-1].sent) < bound+time.Second {
		resp, err := client.Post(srv.URL()+"/function/f?n=10", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatalf("a normal client beside the slow readers: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("a normal client beside the slow readers: %d", resp.StatusCode)
		}
		served++
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	client.CloseIdleConnections()
	// The gateway lets go of every slow reader: their handlers (and the
	// answers they hold) return, and no descriptor of the gateway holds
	// their connections. (A never-reading client may not see the end: the
	// kernel gives up on an orphaned socket whose peer never opens its
	// window without telling the peer.)
	port := srv.ln.Addr().(*net.TCPAddr).Port
	waitUntil(t, "no handler left", func() bool { return srv.guard.open.Load() == 0 })
	waitUntil(t, "no connection held", func() bool { return heldConns(t, port) == 0 })
	for i, r := range readers {
		// None got its whole answer.
		_ = r.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, _ := io.Copy(io.Discard, r.c); n >= answer {
			t.Errorf("reader %d read %d bytes, its whole answer: not cut", i, n)
		}
	}
	t.Logf("%d normal requests served beside %d slow readers", served, len(readers))
}

// heldConns counts the connections to the local TCP port that a
// descriptor still holds (the kernel's table, /proc/net/tcp: sockets with
// an inode; a socket closed with bytes unsent lingers without one).
func heldConns(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no kernel TCP table: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// local_address rem_address st ... inode
		if len(f) < 10 || f[3] == "0A" || f[9] == "0" {
			continue
		}
		if _, p, ok := strings.Cut(f[1], ":"); ok && p == fmt.Sprintf("%04X", port) {
			n++
		}
	}
	return n
}

// A management request whose body stalls is cut at the body's idle bound
// with 408, as a function's is, not a 400 "invalid JSON: i/o timeout".
func TestStalledManagementBodyAnswers408(t *testing.T) {
	srv := limitedServer(t, Limits{ReadHeader: 2 * time.Second, BodyIdle: 500 * time.Millisecond}, 20*time.Second)
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "POST /system/functions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"serv"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "too slowly") {
		t.Fatalf("%d %q, want 408 saying the body came too slowly", resp.StatusCode, body)
	}
}

// A request answered before its body was read (a 400 for bad JSON, a 404
// for a function that does not exist) gets its answer at once when the
// client stalls mid-body, not at the body's idle bound: net/http reads
// the rest before answering, within a short grace. A whole body sent
// keeps the connection for the next request.
func TestEarlyAnswerDoesNotWaitForAStalledBody(t *testing.T) {
	srv := limitedServer(t, Limits{ReadHeader: 2 * time.Second, BodyIdle: 2 * time.Minute}, 20*time.Second)
	for _, c := range []struct {
		req  string
		want int
	}{
		{"POST /system/functions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nxxxxx", http.StatusBadRequest},
		{"POST /function/nobody HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nxxxxx", http.StatusNotFound},
	} {
		c2, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		// Far below the idle bound: before, the answer came at it.
		_ = c2.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c2, c.req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
		if err != nil {
			t.Fatalf("%q: no answer before the idle bound: %v", c.req, err)
		}
		body, _ := io.ReadAll(resp.Body)
		c2.Close()
		if resp.StatusCode != c.want || len(body) < 10 {
			t.Fatalf("%q: %d %q, want %d with a reason", c.req, resp.StatusCode, body, c.want)
		}
	}
	// The whole body sent: the rest is read and the connection kept.
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	for i := range 2 {
		if _, err := io.WriteString(conn, "POST /function/nobody HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nxxxxx"); err != nil {
			t.Fatalf("request %d on the kept connection: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d on the kept connection: %v", i, err)
		}
		_, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusNotFound || resp.Close {
			t.Fatalf("answer %d: %d, close %v; want 404 on a kept connection", i, resp.StatusCode, resp.Close)
		}
	}
}
