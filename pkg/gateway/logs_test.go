package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

func readLogs(t *testing.T, srv *Server, query string) (int, []logMessage, string) {
	t.Helper()
	code, body, _ := do(t, "GET", srv.URL()+"/system/logs?"+query, "", nil)
	var out []logMessage
	if code == 200 {
		dec := json.NewDecoder(strings.NewReader(body))
		for dec.More() {
			var m logMessage
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("not newline-delimited JSON: %v: %q", err, body)
			}
			out = append(out, m)
		}
	}
	return code, out, body
}

func texts(ms []logMessage) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return strings.Join(out, "|")
}

func TestLogsServeTailSinceAndLinesOfExitedInstances(t *testing.T) {
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "talker", "say")}}, nil)
	for _, word := range []string{"one", "two"} {
		if code, _, _ := do(t, "POST", srv.URL()+"/function/talker", word, nil); code != 200 {
			t.Fatalf("invoke: %d", code)
		}
	}
	// stdout and stderr are two pipes: their lines' order between them is
	// not fixed, each one's own is.
	var all []logMessage
	waitUntil(t, "four lines", func() bool { _, all, _ = readLogs(t, srv, "name=talker"); return len(all) == 4 })
	var said []string
	for _, m := range all {
		if m.Name != "talker" || m.Namespace != stack.DefaultNamespace || !strings.HasPrefix(m.Instance, "talker-") || m.Timestamp.IsZero() {
			t.Fatalf("message %+v", m)
		}
		if strings.HasPrefix(m.Text, "said") {
			said = append(said, m.Text)
		}
	}
	if strings.Join(said, ",") != "said one,said two" {
		t.Fatalf("stdout lines %v", said)
	}
	if _, got, _ := readLogs(t, srv, "name=talker.openfaas-fn&tail=1"); len(got) != 1 || got[0] != all[3] {
		t.Fatalf("tail=1: %v, want %v", got, all[3])
	}
	if _, got, _ := readLogs(t, srv, "name=talker&tail=-1&instance="+all[0].Instance); len(got) != 4 {
		t.Fatalf("tail=-1 (faas-cli's all) of the instance: %v", got)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	if _, got, _ := readLogs(t, srv, "name=talker&since="+future); len(got) != 0 {
		t.Fatalf("since an hour ahead: %v", got)
	}
	for q, want := range map[string]int{"": 400, "name=talker&tail=x": 400, "name=talker&since=yesterday": 400,
		"name=talker&follow=maybe": 400, "name=talker&namespace=staging": 404, "name=nobody": 404,
		"name=talker&folow=true": 400, "name=talker&lines=5": 400, "name=talker&instance=talker-nobody": 404,
		"name=talker&instance=talker-nobody&follow=true": 404} {
		if code, _, body := readLogs(t, srv, q); code != want || len(body) < 10 {
			t.Errorf("%q: %d %q, want %d with a reason", q, code, body, want)
		}
	}
	// The lines stay once the instance is gone.
	if code, _, _ := do(t, "POST", srv.URL()+"/system/scale-function/talker", `{"replicas":0}`, nil); code != 202 {
		t.Fatalf("scale to 0: %d", code)
	}
	waitUntil(t, "no instance", func() bool { st, _ := srv.D.Function("talker"); return st.Replicas == 0 })
	if _, got, _ := readLogs(t, srv, "name=talker"); texts(got) != texts(all) {
		t.Fatalf("after the instance exited: %v", got)
	}
	if code, got, _ := readLogs(t, srv, "name=talker&instance="+all[0].Instance); code != 200 || len(got) != 4 {
		t.Fatalf("the exited instance's lines: %d %v", code, got)
	}
}

func TestLogsFollowStreamsNewLinesAndEndsWithTheGateway(t *testing.T) {
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "talker", "say")}}, nil)
	if code, _, _ := do(t, "POST", srv.URL()+"/function/talker", "before", nil); code != 200 {
		t.Fatalf("invoke: %d", code)
	}
	waitUntil(t, "the first lines", func() bool { _, got, _ := readLogs(t, srv, "name=talker"); return len(got) == 2 })
	resp, err := http.Get(srv.URL() + "/system/logs?name=talker&follow=true&tail=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("follow: %d %v", resp.StatusCode, resp.Header)
	}
	lines := make(chan logMessage, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var m logMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	next := func() logMessage {
		t.Helper()
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended early")
			}
			return m
		case <-time.After(15 * time.Second):
			t.Fatal("no line within 15s")
		}
		return logMessage{}
	}
	if m := next(); !strings.HasSuffix(m.Text, "before") {
		t.Fatalf("the tail: %+v", m)
	}
	if code, _, _ := do(t, "POST", srv.URL()+"/function/talker", "after", nil); code != 200 {
		t.Fatalf("invoke: %d", code)
	}
	got := []string{next().Text, next().Text}
	if !strings.Contains(strings.Join(got, ","), "said after") {
		t.Fatalf("followed %v", got)
	}
	// A drain does not wait for the follower: the stream ends at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a follower: %v after %v", err, time.Since(start))
	}
	for range lines {
	}
}

// stdout and stderr are two pipes read concurrently: a partial line on one
// must not take in a line written on the other meanwhile.
func TestLogsKeepStdoutAndStderrLinesApart(t *testing.T) {
	f := stack.Function{Name: "mixer", SizeSensitive: true,
		Command: "printf out-a; sleep 0.3; echo err-line >&2; sleep 0.3; echo out-b; exit 3"}
	f.Defaults()
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{f}}, nil)
	// It exits before it is ready: the request that started it is refused,
	// and its lines are kept.
	if code, _, _ := do(t, "POST", srv.URL()+"/function/mixer", "x", nil); code != 503 {
		t.Fatalf("invoke: %d, want 503 for an instance that exits before ready", code)
	}
	var got []logMessage
	waitUntil(t, "two lines", func() bool { _, got, _ = readLogs(t, srv, "name=mixer"); return len(got) >= 2 })
	lines := map[string]bool{}
	for _, m := range got {
		lines[m.Text] = true
	}
	if len(got) != 2 || !lines["out-aout-b"] || !lines["err-line"] {
		t.Fatalf("lines %q, want out-aout-b (stdout) and err-line (stderr), each whole", texts(got))
	}
}
