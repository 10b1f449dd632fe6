package rthttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer answers POST with its body and GET with ?n bytes; it counts
// the connections it accepted.
func echoServer(t *testing.T, tlsOn bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(b)
		default:
			n := 0
			_, _ = fmt.Sscan(r.URL.Query().Get("n"), &n)
			_, _ = w.Write(bytes.Repeat([]byte("x"), n))
		}
	})
	srv := httptest.NewUnstartedServer(h)
	// Cancelled handshakes are part of the tests, not news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &conns
}

func newFor(srv *httptest.Server) *Transport {
	var cfg *tls.Config
	if srv.TLS != nil {
		cfg = srv.Client().Transport.(*http.Transport).TLSClientConfig
	}
	return New(Options{TLS: cfg, MaxIdle: 4, DialTimeout: 2 * time.Second})
}

func post(t *Transport, ctx context.Context, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

func TestSequentialRequestsReuseOneConnection(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tlsOn), func(t *testing.T) {
			srv, conns := echoServer(t, tlsOn)
			tr := newFor(srv)
			defer tr.Close()
			for i := range 20 {
				want := []byte(strings.Repeat("ab", i*500))
				got, err := post(tr, context.Background(), srv.URL+"/echo", want)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("request %d: got %d bytes, want %d", i, len(got), len(want))
				}
			}
			if n := conns.Load(); n != 1 {
				t.Fatalf("20 sequential requests used %d connections, want 1", n)
			}
		})
	}
}

// Many goroutines, random sizes, some cancelled mid-flight: every
// completed response is the right one, and the idle pool stays bounded.
func TestConcurrentRequestsWithCancellations(t *testing.T) {
	srv, _ := echoServer(t, true)
	tr := newFor(srv)
	defer tr.Close()
	var wg sync.WaitGroup
	var ok, cancelled atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 40 {
				body := make([]byte, rng.IntN(64<<10))
				for i := range body {
					body[i] = byte(rng.Uint32())
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(5) == 0 {
					delay := time.Duration(rng.IntN(300)) * time.Microsecond
					go func() {
						time.Sleep(delay)
						cancel()
					}()
				}
				got, err := post(tr, ctx, srv.URL, body)
				switch {
				case err == nil && !bytes.Equal(got, body):
					t.Errorf("goroutine %d: response of %d bytes for a request of %d", g, len(got), len(body))
				case err == nil:
					ok.Add(1)
				case ctx.Err() != nil:
					cancelled.Add(1)
				default:
					t.Errorf("goroutine %d: %v", g, err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if ok.Load() < 400 {
		t.Fatalf("only %d of 640 requests succeeded (%d cancelled)", ok.Load(), cancelled.Load())
	}
	tr.mu.Lock()
	for k, l := range tr.idle {
		if len(l) > tr.maxIdle {
			t.Errorf("%s: %d idle connections, bound %d", k, len(l), tr.maxIdle)
		}
	}
	tr.mu.Unlock()
}

func TestCancelWakesABlockedRead(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tr := newFor(srv)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	start := time.Now()
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a cancelled round trip returned after %v", d)
	}
}

func TestEarlyCloseDropsTheConnection(t *testing.T) {
	srv, conns := echoServer(t, false)
	tr := newFor(srv)
	defer tr.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"?n=1000000", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	got, err := post(tr, context.Background(), srv.URL, []byte("after"))
	if err != nil || string(got) != "after" {
		t.Fatalf("request after an early close: %q, %v", got, err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2 (the half-read one is not reused)", n)
	}
}

// A server that closes an idle connection: the next request on it is
// sent again on a new connection, body included.
func TestRetriesOnceWhenTheServerClosedAnIdleConnection(t *testing.T) {
	srv, conns := echoServer(t, false)
	tr := newFor(srv)
	defer tr.Close()
	if _, err := post(tr, context.Background(), srv.URL, []byte("one")); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	time.Sleep(20 * time.Millisecond)
	got, err := post(tr, context.Background(), srv.URL, []byte("two"))
	if err != nil || string(got) != "two" {
		t.Fatalf("after the server closed the idle connection: %q, %v", got, err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2", n)
	}
}

func TestReadDeadlineTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(2 * time.Second)
		}
	}()
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	c, err := dial(ap, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	// Close while another goroutine is blocked in Read wakes it.
	_ = c.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	_ = c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a blocked Read")
	}
}

func TestRejectsWhatItCannotSend(t *testing.T) {
	tr := New(Options{})
	for _, u := range []string{"ftp://127.0.0.1/x", "http:///nohost"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if _, err := tr.RoundTrip(req); err == nil {
			t.Errorf("%s: no error", u)
		}
	}
	tr.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	// Nothing listens on port 1: a refused connect is an error, not a hang.
	tr2 := New(Options{DialTimeout: time.Second})
	if _, err := tr2.RoundTrip(req); err == nil {
		t.Error("dial to a closed port: no error")
	}
}

func TestIdleConnectionsAreRetiredBeforeTheServerDoes(t *testing.T) {
	srv, conns := echoServer(t, false)
	tr := New(Options{IdleTimeout: 50 * time.Millisecond})
	defer tr.Close()
	for range 2 {
		if _, err := post(tr, context.Background(), srv.URL, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(120 * time.Millisecond)
	if _, err := post(tr, context.Background(), srv.URL, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2 (one reused at once, a new one after the idle timeout)", n)
	}
}

// A connection that breaks after the server has begun to answer is not
// retried: the request may have been carried out.
func TestAnAnsweredRequestIsNotSentTwice(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) == 1 {
			return // the first request is answered normally, to keep the connection
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			t.Error("no hijacker")
			return
		}
		c, buf, err := hj.Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Le") // cut off mid-header
		_ = buf.Flush()
		_ = c.Close()
	}))
	defer srv.Close()
	tr := New(Options{})
	defer tr.Close()
	if _, err := post(tr, context.Background(), srv.URL, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if _, err := post(tr, context.Background(), srv.URL, []byte("two")); err == nil {
		t.Fatal("a response cut off mid-header was taken for an answer")
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("the server saw %d requests, want 2: the cut-off one must not be sent again", n)
	}
}

// A host name goes through the resolver once per connection; the round
// trip itself is the same.
func TestDialsAHostName(t *testing.T) {
	srv, _ := echoServer(t, false)
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	tr := New(Options{})
	defer tr.Close()
	got, err := post(tr, context.Background(), u, []byte("by name"))
	if err != nil || string(got) != "by name" {
		t.Fatalf("POST %s: %q, %v", u, got, err)
	}
}
