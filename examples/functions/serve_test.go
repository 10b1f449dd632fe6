package functions

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveOn starts Serve on a loopback port and returns its URL and result.
func serveOn(t *testing.T, ctx context.Context, h http.Handler, drain time.Duration) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, drain) }()
	return "http://" + ln.Addr().String(), done
}

// blockingHandler answers once release is closed, after telling started.
func blockingHandler(started chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		started <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "done")
	})
}

// On cancel, Serve stops accepting, lets the in-flight request finish, and
// returns nil.
func TestServeDrainsInFlightRequests(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	started, release := make(chan struct{}), make(chan struct{})
	url, done := serveOn(t, ctx, blockingHandler(started, release), 5*time.Second)
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Post(url, "text/plain", strings.NewReader("x"))
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	<-started
	cancel()
	waitRefused(t, url)
	close(release)
	if got := <-answer; got != "done" {
		t.Errorf("in-flight request got %q, want done", got)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve = %v after a clean drain", err)
	}
}

// A request still running at the drain bound is cut off, and Serve says so.
func TestServeReportsRequestsCutAtTheBound(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	url, done := serveOn(t, ctx, blockingHandler(started, release), 50*time.Millisecond)
	go func() {
		if resp, err := http.Post(url, "text/plain", nil); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Errorf("Serve = %v, want a cut-off error", err)
	}
}

// waitRefused waits until the listener is closed, which Shutdown does first.
func waitRefused(t *testing.T, url string) {
	t.Helper()
	addr := strings.TrimPrefix(url, "http://")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("still accepting connections after cancel")
}
