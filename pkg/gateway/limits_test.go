package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/stack"
)

func TestMemoryLimitKillsTheTreeAndSaysOOM(t *testing.T) {
	srv := startGateway(t, &stack.Stack{}, nil)
	limits := map[string]any{"limits": map[string]string{"memory": "200Mi", "cpu": "500m"},
		"requests": map[string]string{"memory": "100Mi"}}
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "hungry", "hog", limits), nil); code != 202 {
		t.Fatalf("deploy: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/hungry", "0", nil); code != 200 || body != "survived" {
		t.Fatalf("under the limit: %d %q", code, body)
	}
	// 400 MiB in a grandchild: the tree is past 200 MiB.
	code, body, _ := do(t, "POST", srv.URL()+"/function/hungry", "400", nil)
	if code < 500 || !strings.Contains(body, "OOM") || !strings.Contains(body, "limit 200 MiB") {
		t.Fatalf("over the limit: %d %q, want a 5xx saying OOM", code, body)
	}
	t.Logf("over the limit: %d %s", code, body)
	code, st := describe(t, srv, "hungry")
	if code != 200 || st.Limits == nil || st.Limits.Resources != (stack.Resources{Memory: "200Mi", CPU: "500m"}) ||
		st.Requests == nil || st.Requests.Resources != (stack.Resources{Memory: "100Mi"}) {
		t.Fatalf("describe does not return the limits as deployed: %+v %+v", st.Limits, st.Requests)
	}
	e := st.Enforcement
	if e == nil || e.OOMKills < 1 || e.LastOOM == nil || !e.Memory.Enforced || e.CPU.Enforced || !strings.Contains(e.CPU.Reason, "cgroup") ||
		e.Requests.Enforced || e.Requests.Reason == "" {
		b, _ := json.Marshal(e)
		t.Fatalf("enforcement %s", b)
	}
	_, metrics, _ := do(t, "GET", srv.URL()+"/metrics", "", nil)
	if !strings.Contains(metrics, `gantry_function_oom_kills_total{function_name="hungry.openfaas-fn"}`) {
		t.Fatal("no OOM series in /metrics")
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/hungry", "0", nil); code != 200 || body != "survived" {
		t.Fatalf("a new instance after the kill: %d %q", code, body)
	}
	if code, _, _ := do(t, "DELETE", srv.URL()+"/system/functions", `{"functionName":"hungry"}`, nil); code != 202 {
		t.Fatalf("remove: %d", code)
	}
	if _, metrics, _ := do(t, "GET", srv.URL()+"/metrics", "", nil); strings.Contains(metrics, `gantry_function_oom_kills_total{function_name="hungry.openfaas-fn"}`) {
		t.Fatal("the removed function's OOM series stays")
	}
}

func TestLimitsTheLocalRuntimeCannotHonourAreRefused(t *testing.T) {
	srv := startGateway(t, &stack.Stack{}, nil)
	for want, extra := range map[string]map[string]any{
		"readOnlyRootFilesystem": {"readOnlyRootFilesystem": true},
		"GPUs":                   {"limits": map[string]string{"nvidia.com/gpu": "1"}},
		"not a quantity":         {"limits": map[string]string{"memory": "a lot"}},
	} {
		if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "refused", "echo", extra), nil); code != 400 || !strings.Contains(body, want) {
			t.Errorf("%v: %d %q, want 400 with %q", extra, code, body, want)
		}
	}
}
