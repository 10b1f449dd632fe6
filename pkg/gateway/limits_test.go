package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/cpulimit"
	"gantry.dev/gantry/pkg/stack"
)

func TestMemoryLimitKillsTheTreeAndSaysOOM(t *testing.T) {
	srv := startGateway(t, &stack.Stack{}, nil)
	limits := map[string]any{"limits": map[string]string{"memory": "200Mi"},
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
	if code != 200 || st.Limits == nil || st.Limits.Resources != (stack.Resources{Memory: "200Mi"}) ||
		st.Requests == nil || st.Requests.Resources != (stack.Resources{Memory: "100Mi"}) {
		t.Fatalf("describe does not return the limits as deployed: %+v %+v", st.Limits, st.Requests)
	}
	e := st.Enforcement
	if e == nil || e.OOMKills < 1 || e.LastOOM == nil || !e.Memory.Enforced || e.CPU != nil ||
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
	cases := map[string]map[string]any{
		"readOnlyRootFilesystem": {"readOnlyRootFilesystem": true},
		"GPUs":                   {"limits": map[string]string{"nvidia.com/gpu": "1"}},
		"not a quantity":         {"limits": map[string]string{"memory": "a lot"}},
	}
	if probe, err := cpulimit.Open(); err == nil {
		_ = probe.Close()
	} else {
		// Without a cgroup to enforce it with, a CPU limit is refused.
		cases["limits.cpu cannot be enforced"] = map[string]any{"limits": map[string]string{"cpu": "500m"}}
	}
	for want, extra := range cases {
		if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "refused", "echo", extra), nil); code != 400 || !strings.Contains(body, want) {
			t.Errorf("%v: %d %q, want 400 with %q", extra, code, body, want)
		}
	}
}

// TestCPULimitThrottlesTheInstanceTree deploys a function whose process
// tree spins (a shell's background loop beside the instance) with a CPU
// limit of 200m, checks in its cgroup's cpu.stat that the kernel throttles
// it, and that neither stopping the instance nor the gateway leaves a
// group behind.
func TestCPULimitThrottlesTheInstanceTree(t *testing.T) {
	probe, err := cpulimit.Open()
	if err != nil {
		t.Skipf("no cgroup to enforce CPU limits with here (not root, or no writable cpu controller): %v", err)
	}
	_ = probe.Close()
	srv := startGateway(t, &stack.Stack{}, nil)
	self, _ := os.Executable()
	extra := map[string]any{"limits": map[string]string{"cpu": "200m"},
		"envProcess": "while :; do :; done & exec '" + self + "'"}
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "spin", "echo", extra), nil); code != 202 {
		t.Fatalf("deploy: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/spin", "x", nil); code != 200 {
		t.Fatalf("invoke: %d %q", code, body)
	}
	if _, st := describe(t, srv, "spin"); st.Enforcement == nil || st.Enforcement.CPU == nil || !st.Enforcement.CPU.Enforced {
		b, _ := json.Marshal(st.Enforcement)
		t.Fatalf("enforcement %s, want cpu enforced", b)
	}
	gw, err := srv.G.limits.cpuGroups()
	if err != nil {
		t.Fatal(err)
	}
	groups, _ := filepath.Glob(filepath.Join(gw.Dir(), "spin-*"))
	if len(groups) != 1 {
		t.Fatalf("instance groups %v, want one", groups)
	}
	var stat string
	if !eventually(10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(groups[0], "cpu.stat"))
		stat = string(b)
		return throttled(stat) > 0
	}) {
		t.Fatalf("the spinning instance is not throttled: cpu.stat %q", stat)
	}
	t.Logf("%s cpu.stat: %s", groups[0], strings.Join(strings.Fields(stat), " "))
	if code, _, _ := do(t, "DELETE", srv.URL()+"/system/functions", `{"functionName":"spin"}`, nil); code != 202 {
		t.Fatalf("remove: %d", code)
	}
	if !eventually(10*time.Second, func() bool { _, err := os.Stat(groups[0]); return errors.Is(err, os.ErrNotExist) }) {
		t.Fatalf("the stopped instance's group %s stays", groups[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	if _, err := os.Stat(gw.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stopped gateway's group %s stays: %v", gw.Dir(), err)
	}
}

// throttled is cpu.stat's nr_throttled.
func throttled(stat string) int {
	for _, line := range strings.Split(stat, "\n") {
		if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func eventually(limit time.Duration, ok func() bool) bool {
	for end := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		if ok() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
