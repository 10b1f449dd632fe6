package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/examples/functions"
)

// startFn runs `gantry ARGS...` in-process and returns the address it
// listens on, read from its stderr, and its result once it exits.
func startFn(t *testing.T, ctx context.Context, args ...string) (string, <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(pw)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		pw.Close()
		done <- err
	}()
	addrs := make(chan string, 1)
	go func() {
		defer close(addrs)
		sc := bufio.NewScanner(pr)
		for sc.Scan() { // keep reading so the command never blocks on stderr
			if _, addr, ok := strings.Cut(sc.Text(), "listening on http://"); ok {
				addrs <- addr
			}
		}
	}()
	addr, ok := <-addrs
	if !ok {
		t.Fatalf("gantry %v exited before listening: %v", args, <-done)
	}
	return addr, done
}

// waitClosed waits until nothing accepts connections at addr any more.
func waitClosed(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
	}
	t.Fatalf("%s still accepts connections", addr)
}

// The real command serves its function, and on cancellation (what SIGTERM
// does to cmd.Context) stops accepting, finishes the request in flight and
// exits cleanly.
func TestFnServesAndDrainsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startFn(t, ctx, "fn", "translate", "--addr", "127.0.0.1:0")
	url := "http://" + addr
	resp, err := http.Get(url + functions.HealthPath)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()

	// Expect: 100-continue makes the client wait until the handler starts
	// reading the body, so the request is surely in flight at cancel time.
	body := []byte("good morning")
	pr, pw := io.Pipe()
	inFlight := make(chan struct{})
	trace := &httptrace.ClientTrace{Got100Continue: func() { close(inFlight) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, url+"/", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	answer := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("in-flight request: %v", err)
		}
		answer <- resp
	}()
	<-inFlight
	cancel()
	waitClosed(t, addr)
	if _, err := pw.Write(body); err != nil {
		t.Fatal(err)
	}
	pw.Close()

	resp = <-answer
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != "bueno mañana" || resp.Header.Get(functions.HeaderOutputSize) == "" {
		t.Errorf("in-flight request: %d %q (X-Output-Size %q), want 200 \"bueno mañana\"",
			resp.StatusCode, got, resp.Header.Get(functions.HeaderOutputSize))
	}
	if err := <-done; err != nil {
		t.Errorf("gantry fn exited with %v after a clean drain", err)
	}
}

// A stack file configures replay and the port through the environment.
func TestFnReplayFromEnvironment(t *testing.T) {
	t.Setenv("PORT", "0")
	t.Setenv("GANTRY_APP", "email-categorization")
	t.Setenv("GANTRY_FUNCTION", "1")
	t.Setenv("GANTRY_SEED", "5")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startFn(t, ctx, "fn", "replay")
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("listening on %s, want loopback", addr)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("{}"))
	req.Header.Set(functions.HeaderInputSize, "2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reply struct{ App, Function string }
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if reply.App != "email-categorization" || reply.Function != "email-classify" {
		t.Errorf("replayed %s/%s, want email-categorization/email-classify", reply.App, reply.Function)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("exit: %v", err)
	}
}

// Bad names, flags and environment are usage errors (exit 2) before the
// command listens.
func TestFnUsageErrors(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"fn"}},
		{nil, []string{"fn", "nope", "--addr", "127.0.0.1:0"}},
		{nil, []string{"fn", "sentiment", "translate"}},
		{nil, []string{"fn", "--list", "sentiment"}},
		{nil, []string{"fn", "sentiment", "--no-such-flag"}},
		{nil, []string{"fn", "sentiment", "--app", "sentiment-analysis", "--addr", "127.0.0.1:0"}},
		{nil, []string{"fn", "sentiment", "--drain", "0s", "--addr", "127.0.0.1:0"}},
		{map[string]string{"PORT": ""}, []string{"fn", "sentiment"}},
		{map[string]string{"PORT": "http"}, []string{"fn", "sentiment"}},
		{nil, []string{"fn", "replay", "--addr", "127.0.0.1:0"}},
		{nil, []string{"fn", "replay", "--app", "nope", "--function", "0", "--addr", "127.0.0.1:0"}},
		{nil, []string{"fn", "replay", "--app", "sentiment-analysis", "--function", "7", "--addr", "127.0.0.1:0"}},
		{map[string]string{"GANTRY_SEED": "x"}, []string{"fn", "replay", "--app", "sentiment-analysis", "--function", "0", "--addr", "127.0.0.1:0"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for _, k := range []string{"PORT", "GANTRY_APP", "GANTRY_FUNCTION", "GANTRY_SEED"} {
				t.Setenv(k, c.env[k])
			}
			// A case that wrongly starts serving is stopped by the timeout
			// and then fails for not being a usage error.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			root := newRootCmd()
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			root.SetArgs(c.args)
			err := root.ExecuteContext(ctx)
			if ue := (usageError{}); !errors.As(err, &ue) {
				t.Errorf("got %v, want a usage error", err)
			}
		})
	}
}

func TestFnList(t *testing.T) {
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetArgs([]string{"fn", "--list"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, name := range functions.Names() {
		if !strings.Contains(out.String(), "\n"+name+" ") {
			t.Errorf("--list lacks %s:\n%s", name, out.String())
		}
	}
	for _, want := range []string{"audio-translation/text-translate", "alias of translate", "KB -> KB", "MB -> MB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--list lacks %q:\n%s", want, out.String())
		}
	}
}
