package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &conns
}

func upReq(s *httptest.Server, method, path, query, body string) *upRequest {
	return &upRequest{addr: strings.TrimPrefix(s.URL, "http://"), method: method, path: path, query: query,
		header: http.Header{"X-Test": {"v"}, "Connection": {"close"}}, body: []byte(body)}
}

// Many goroutines share the pool: every answer is its own request's, and
// connections are reused rather than dialled per request.
func TestUpstreamConcurrentRequestsReuseConnections(t *testing.T) {
	s, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Connection") != "" || r.Header.Get("X-Test") != "v" {
			w.WriteHeader(400)
		}
		fmt.Fprintf(w, "%s %s?%s %s", r.Method, r.URL.Path, r.URL.RawQuery, b)
	}))
	u := newUpstream()
	defer u.close()
	var wg sync.WaitGroup
	const workers, each = 16, 50
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				body := fmt.Sprintf("w%d-i%d", w, i)
				resp, err := u.do(context.Background(), upReq(s, "POST", "/a b/c", "x=1", body), time.Now().Add(5*time.Second), 1<<20)
				if err != nil {
					t.Error(err)
					return
				}
				if want := "POST /a b/c?x=1 " + body; resp.status != 200 || string(resp.body) != want {
					t.Errorf("got %d %q, want 200 %q", resp.status, resp.body, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := conns.Load(); n > workers {
		t.Fatalf("%d connections for %d concurrent workers: not reused", n, workers)
	}
}

// An idle connection the instance closed is noticed before reuse, so the
// next request goes out on a fresh one and succeeds.
func TestUpstreamSkipsConnectionsTheInstanceClosed(t *testing.T) {
	s, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	u := newUpstream()
	defer u.close()
	do := func() {
		resp, err := u.do(context.Background(), upReq(s, "POST", "/", "", "x"), time.Now().Add(5*time.Second), 1<<20)
		if err != nil || string(resp.body) != "ok" {
			t.Fatalf("%v %v", resp, err)
		}
	}
	do()
	s.CloseClientConnections()
	time.Sleep(20 * time.Millisecond) // the FIN arrives
	do()
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// Chunked, declared-length, HEAD and oversized answers; the deadline and
// a cancelled context end a request that gets no answer.
func TestUpstreamFramingBoundsAndDeadlines(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	s, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write([]byte("ab"))
			w.(http.Flusher).Flush()
			w.Write([]byte("cd"))
		case "/big":
			w.Write(bytes.Repeat([]byte("z"), 2048))
		case "/block":
			select {
			case <-block:
			case <-r.Context().Done():
			}
		default:
			w.Header().Set("Content-Length", "3")
			if r.Method != http.MethodHead {
				w.Write([]byte("abc"))
			}
		}
	}))
	u := newUpstream()
	defer u.close()
	far := time.Now().Add(5 * time.Second)
	if r, err := u.do(context.Background(), upReq(s, "GET", "/chunked", "", ""), far, 1024); err != nil || string(r.body) != "abcd" {
		t.Fatalf("chunked: %v %v", r, err)
	}
	if r, err := u.do(context.Background(), upReq(s, "HEAD", "/len", "", ""), far, 1024); err != nil || len(r.body) != 0 || r.status != 200 {
		t.Fatalf("HEAD: %v %v", r, err)
	}
	if r, err := u.do(context.Background(), upReq(s, "GET", "/len", "", ""), far, 1024); err != nil || string(r.body) != "abc" {
		t.Fatalf("after HEAD on a reused connection: %v %v", r, err)
	}
	if _, err := u.do(context.Background(), upReq(s, "GET", "/big", "", ""), far, 1024); !errors.Is(err, errTooLarge) {
		t.Fatalf("2048 bytes with a 1024 limit: %v", err)
	}
	start := time.Now()
	if _, err := u.do(context.Background(), upReq(s, "GET", "/block", "", ""), time.Now().Add(50*time.Millisecond), 1024); err == nil {
		t.Fatal("no error past the deadline")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("deadline of 50ms took %v", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := u.do(ctx, upReq(s, "GET", "/block", "", ""), far, 1024); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
}

// A refused connection is a dial error: nothing reached the instance.
func TestUpstreamRefusedIsADialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u := newUpstream()
	defer u.close()
	_, err = u.do(context.Background(), &upRequest{addr: addr, method: "POST", path: "/"}, time.Now().Add(time.Second), 10)
	var dial *errDial
	if !errors.As(err, &dial) {
		t.Fatalf("%v, want a dial error", err)
	}
}

// Header fields that would break the request's framing are never written.
func TestUpstreamWritesNoInjectedFields(t *testing.T) {
	var got http.Header
	s, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	u := newUpstream()
	defer u.close()
	r := upReq(s, "POST", "/", "", "")
	r.header = http.Header{"Good": {"1"}, "Bad": {"x\r\nInjected: 1"}, "Bad Name": {"1"}}
	if _, err := u.do(context.Background(), r, time.Now().Add(time.Second), 10); err != nil {
		t.Fatal(err)
	}
	if got.Get("Good") != "1" || got.Get("Injected") != "" || got.Get("Bad") != "" {
		t.Fatalf("headers %v", got)
	}
}

// The janitor drops idle connections whose instance closed them or that
// idled too long, and keeps the others.
func TestUpstreamSweepDropsStaleConnections(t *testing.T) {
	a, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	b, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	u := newUpstream()
	defer u.close()
	for _, s := range []*httptest.Server{a, b} {
		if _, err := u.do(context.Background(), upReq(s, "GET", "/", "", ""), time.Now().Add(time.Second), 10); err != nil {
			t.Fatal(err)
		}
	}
	if u.nIdle != 2 {
		t.Fatalf("%d idle, want 2", u.nIdle)
	}
	a.CloseClientConnections()
	time.Sleep(20 * time.Millisecond)
	u.sweep(time.Now())
	u.mu.Lock()
	n, nb := u.nIdle, len(u.idle[strings.TrimPrefix(b.URL, "http://")])
	u.mu.Unlock()
	if n != 1 || nb != 1 {
		t.Fatalf("after a's instance closed: %d idle (%d to b), want b's alone", n, nb)
	}
	u.sweep(time.Now().Add(2 * u.idleTimeout))
	if u.nIdle != 0 {
		t.Fatalf("%d idle past the idle timeout", u.nIdle)
	}
}

// A body declared large is not allocated before its bytes arrive, on
// either side of the gateway; bodies past the exact-read size still come
// through whole.
func TestDeclaredLengthIsNotAllocatedUpFront(t *testing.T) {
	g := New(Config{Dispatcher: nil, MaxBody: 64 << 20})
	defer g.Close()
	// As the server's body reader ends a body shorter than declared.
	short := io.MultiReader(strings.NewReader("only ten b"), iotest.ErrReader(io.ErrUnexpectedEOF))
	req := httptest.NewRequest(http.MethodPost, "/function/f", short)
	req.ContentLength = 32 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, fail := g.readBody(httptest.NewRecorder(), req)
	runtime.ReadMemStats(&after)
	if fail == nil || fail.status != http.StatusBadRequest {
		t.Fatalf("a body shorter than declared: %v, want 400", fail)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("reading 10 bytes of a body declared 32 MiB allocated %d bytes", grew)
	}
	big := bytes.Repeat([]byte("b"), exactRead*3+7)
	req = httptest.NewRequest(http.MethodPost, "/function/f", bytes.NewReader(big))
	got, fail := g.readBody(httptest.NewRecorder(), req)
	if fail != nil || !bytes.Equal(got, big) {
		t.Fatalf("a %d-byte body: %v, %d bytes back", len(big), fail, len(got))
	}
	s, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(big) }))
	resp, err := g.up.do(context.Background(), upReq(s, "GET", "/", "", ""), time.Now().Add(5*time.Second), 1<<20)
	if err != nil || !bytes.Equal(resp.body, big) {
		t.Fatalf("a %d-byte answer: %v", len(big), err)
	}
}
