package backend

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/listenfd"
	"gantry.dev/gantry/pkg/stack"
)

// socketInstance is the test binary as an instance that declares
// socket_activation. "socket" waits until the file $GATE exists before it
// touches the passed socket, then serves it, answering with the listenfd
// variables as it found them; "hang" never touches it.
func socketInstance(mode string) {
	if mode == "hang" {
		time.Sleep(time.Hour)
	}
	for {
		if _, err := os.Stat(os.Getenv("GATE")); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	found := fmt.Sprintf("LISTEN_FDS=%s LISTEN_PID=%s pid=%d", os.Getenv(listenfd.EnvFDs), os.Getenv(listenfd.EnvPID), os.Getpid())
	ln, ok, err := listenfd.Inherited()
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "no passed socket (%s): %v\n", found, err)
		os.Exit(3)
	}
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "served from the passed socket: %s", found)
	}))
}

func socketFn(t *testing.T, mode, gate string) (f stack.Function) {
	f = instanceFn(t, "sock", mode)
	f.SocketActivation = true
	f.Env["GATE"] = gate
	return f
}

// An instance that declares socket_activation is ready as soon as its
// process exists: a request sent then is queued on the socket the runtime
// passed it and served once the process gets to it. The instance here
// does not touch its socket until the test has connected and sent its
// request, so with readiness polling it would never be ready first.
func TestSocketActivatedInstanceServesARequestQueuedBeforeItAccepts(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{})
	gate := filepath.Join(t.TempDir(), "gate")
	if err := l.Deploy(context.Background(), socketFn(t, "socket", gate)); err != nil {
		t.Fatal(err)
	}
	l.Start("sock", 1)
	if e := rec.next(t); e != "ready" {
		t.Fatalf("got %s, want ready before the instance touched its socket", e)
	}
	inst := rec.ready[0]
	c, err := net.Dial("tcp", inst.Addr)
	if err != nil {
		t.Fatalf("the instance's socket takes no connection before it accepts: %v", err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the queued request got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "served from the passed socket: LISTEN_FDS=1 LISTEN_PID=") {
		t.Fatalf("answer %q", body)
	}
	// LISTEN_PID named the process itself, as it sees its PID.
	var fds, pid, self string
	if _, err := fmt.Sscanf(strings.TrimPrefix(string(body), "served from the passed socket: "), "LISTEN_FDS=%s LISTEN_PID=%s pid=%s", &fds, &pid, &self); err != nil || pid != self {
		t.Fatalf("answer %q: LISTEN_PID is not the instance's own PID (%v)", body, err)
	}
	l.Stop(inst)
	if e := rec.next(t); e != "exited" || rec.exited[inst.ID] != nil {
		t.Fatalf("stop: %s %v", e, rec.exited)
	}
}

// An instance that declares socket_activation but never answers on the
// socket is stopped within the start timeout and reported gone with the
// reason; a request queued on it is refused then, not left waiting.
func TestSocketActivatedInstanceThatNeverAnswersIsStoppedWithinTheStartTimeout(t *testing.T) {
	l, rec := newTestLocal(t, LocalConfig{ReadyTimeout: 500 * time.Millisecond})
	if err := l.Deploy(context.Background(), socketFn(t, "hang", "")); err != nil {
		t.Fatal(err)
	}
	l.Start("sock", 1)
	if e := rec.next(t); e != "ready" {
		t.Fatalf("got %s, want ready", e)
	}
	inst := rec.ready[0]
	c, err := net.Dial("tcp", inst.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if e := rec.next(t); e != "exited" {
		t.Fatalf("got %s, want exited", e)
	}
	if err := rec.exited[inst.ID]; err == nil || !strings.Contains(err.Error(), "socket_activation") || !strings.Contains(err.Error(), listenfd.EnvFDs) {
		t.Fatalf("exit reason %v, want one naming socket_activation and %s", err, listenfd.EnvFDs)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n > 0 || isTimeout(err) {
		t.Fatalf("the queued connection: %d bytes, %v; want it closed", n, err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
