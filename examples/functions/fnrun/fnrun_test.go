package fnrun

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"gantry.dev/gantry/pkg/listenfd"
)

// Without --addr, fn listens on $POD_IP when the backend sets it (probes
// and endpoints reach the pod IP) and on loopback otherwise.
func TestListensOnThePodIP(t *testing.T) {
	cases := []struct{ podIP, want string }{
		{"", "127.0.0.1:8080"},
		{"198.18.0.7", "198.18.0.7:8080"},
		{"fd00::7", "[fd00::7]:8080"},
		{"not-an-ip", "127.0.0.1:8080"},
	}
	for _, c := range cases {
		t.Setenv("PORT", "8080")
		t.Setenv("POD_IP", c.podIP)
		got, err := (&Flags{}).listenAddr()
		if err != nil || got != c.want {
			t.Errorf("POD_IP=%q: got %q, %v; want %q", c.podIP, got, err, c.want)
		}
	}
	t.Setenv("POD_IP", "198.18.0.7")
	if got, _ := (&Flags{Addr: "127.0.0.1:9"}).listenAddr(); got != "127.0.0.1:9" {
		t.Errorf("--addr must win over POD_IP, got %q", got)
	}
}

// A malformed --addr is a usage error, before anything listens.
func TestBadAddrIsAUsageError(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1", "127.0.0.1:http", ":-1"} {
		_, err := (&Flags{Addr: addr}).listenAddr()
		if ue := (UsageError{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--addr") {
			t.Errorf("--addr %s: got %v, want a usage error naming --addr", addr, err)
		}
	}
	if got, err := (&Flags{Addr: "[::1]:0"}).listenAddr(); err != nil || got != "[::1]:0" {
		t.Errorf("--addr [::1]:0: %q %v", got, err)
	}
}

// --addr together with a passed socket is a contradiction, refused as a
// usage error rather than one of them ignored.
func TestAddrAndAPassedSocketAreAUsageError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fl := Flags{inherited: func() (net.Listener, bool, error) { return ln, true, nil }}
	fl.Register(fs)
	if err := fs.Parse([]string{"sentiment", "--addr", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err = fl.Main(ctx, fs.Args(), io.Discard, io.Discard)
	if ue := (UsageError{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), listenfd.EnvFDs) {
		t.Fatalf("got %v, want a usage error naming %s", err, listenfd.EnvFDs)
	}
}

// A passed socket is served without PORT or --addr.
func TestMainServesAPassedSocket(t *testing.T) {
	t.Setenv("PORT", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fl := Flags{inherited: func() (net.Listener, bool, error) { return ln, true, nil }}
	fl.Register(fs)
	if err := fs.Parse([]string{"sentiment"}); err != nil {
		t.Fatal(err)
	}
	serveAndCall(t, &fl, fs.Args())
}

// Main serves the named function where the flags say, and stops when its
// context ends.
func TestMainServesTheFunction(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var fl Flags
	fl.Register(fs)
	if err := fs.Parse([]string{"sentiment", "--addr", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	serveAndCall(t, &fl, fs.Args())
}

// serveAndCall runs fl.Main, calls the function once and stops it.
func serveAndCall(t *testing.T, fl *Flags, args []string) {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fl.Main(ctx, args, io.Discard, pw); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	_, addr, ok := strings.Cut(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("stderr %q %v", line, err)
	}
	resp, err := http.Post(addr+"/", "text/plain", strings.NewReader("a lovely day"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}
