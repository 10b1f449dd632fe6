package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A function whose pods crash-loop on a process node is answered like the
// local runtime answers one: a request gets 503 with the pod's reason (its
// exit code) long before the ready timeout, and describe shows the crash
// loop and the reason.
func TestKubernetesCrashLoopAnswers503WithThePodsReason(t *testing.T) {
	e := setup(t)
	srv, api := startKubeGateway(t, e)
	api("POST", "/system/functions", `{"service":"crash","image":"example.invalid/crash:1",`+
		`"envProcess":"echo boom >&2; exit 3"}`, 202)

	// Bounded well under the backend's one-minute ready timeout: an answer
	// within it can only come from the pod's status.
	c := &http.Client{Timeout: 45 * time.Second}
	resp, err := c.Post(srv.URL()+"/function/crash", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "exit code 3") {
		t.Fatalf("invoke: %d %q, want 503 with the exit code", resp.StatusCode, body)
	}

	var st struct {
		State    string `json:"state"`
		Restarts int    `json:"restarts"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(api("GET", "/system/function/crash", "", 200)), &st); err != nil {
		t.Fatal(err)
	}
	if (st.State != "backoff" && st.State != "failed" && st.State != "starting") || st.Restarts < 1 ||
		!strings.Contains(st.Reason, "exit code 3") {
		t.Fatalf("describe: %+v", st)
	}
	api("DELETE", "/system/functions", `{"functionName":"crash"}`, 202)
}
