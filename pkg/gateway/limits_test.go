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

	"github.com/prometheus/client_golang/prometheus"

	"gantry.dev/gantry/pkg/cpulimit"
	"gantry.dev/gantry/pkg/stack"
)

func TestMemoryLimitKillsTheTreeAndSaysOOM(t *testing.T) {
	srv := startGateway(t, &stack.Stack{}, nil)
	limits := map[string]any{"limits": map[string]string{"memory": "200Mi"}}
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
	if code != 200 || st.Limits == nil || st.Limits.Resources != (stack.Resources{Memory: "200Mi"}) {
		t.Fatalf("describe does not return the limits as deployed: %+v", st.Limits)
	}
	e := st.Enforcement
	if e == nil || e.OOMKills < 1 || e.LastOOM == nil || !e.Memory.Enforced || e.CPU != nil || e.Requests != nil {
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
	// Without a cgroup to enforce them with, a CPU limit, a CPU request
	// and a memory request are refused.
	probe, err := cpulimit.Open()
	supports := func(kind string) bool { return err == nil && probe.Supports(kind) == nil }
	if !supports(cpulimit.CPU) {
		cases["limits.cpu cannot be enforced"] = map[string]any{"limits": map[string]string{"cpu": "500m"}}
		cases["requests.cpu cannot be enforced"] = map[string]any{"requests": map[string]string{"cpu": "250m"}}
	}
	if !supports(cpulimit.Memory) {
		cases["requests.memory cannot be enforced"] = map[string]any{"requests": map[string]string{"memory": "64Mi"}}
	}
	if err == nil {
		_ = probe.Close()
	}
	for want, extra := range cases {
		if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "refused", "echo", extra), nil); code != 400 || !strings.Contains(body, want) {
			t.Errorf("%v: %d %q, want 400 with %q", extra, code, body, want)
		}
	}
}

// TestRequestsSetTheInstancesCgroup deploys a function with a CPU and a
// memory request, as the kubelet honours them for a container: its
// instance's cgroup gets the kubelet's cpu.shares (or cgroup v2's
// cpu.weight) and reclaim protection for the requested memory (v2's
// memory.min, v1's memory.soft_limit_in_bytes), describe says so, and
// removing the function leaves no group.
func TestRequestsSetTheInstancesCgroup(t *testing.T) {
	probe, err := cpulimit.Open()
	if err != nil {
		t.Skipf("no cgroup to honour requests with here (not root, or no writable controller): %v", err)
	}
	for _, kind := range []string{cpulimit.CPU, cpulimit.Memory} {
		if err := probe.Supports(kind); err != nil {
			_ = probe.Close()
			t.Skipf("no cgroup with the %s controller here: %v", kind, err)
		}
	}
	_ = probe.Close()
	srv := startGateway(t, &stack.Stack{}, nil)
	extra := map[string]any{"requests": map[string]string{"cpu": "250m", "memory": "64Mi"}}
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "held", "echo", extra), nil); code != 202 {
		t.Fatalf("deploy: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/held", "x", nil); code != 200 {
		t.Fatalf("invoke: %d %q", code, body)
	}
	_, st := describe(t, srv, "held")
	if st.Requests == nil || st.Requests.Resources != (stack.Resources{CPU: "250m", Memory: "64Mi"}) {
		t.Fatalf("describe does not return the requests as deployed: %+v", st.Requests)
	}
	if e := st.Enforcement; e == nil || e.Requests == nil || !e.Requests.Enforced || !strings.Contains(e.Requests.How, "cpu.shares 256") {
		b, _ := json.Marshal(st.Enforcement)
		t.Fatalf("enforcement %s, want requests enforced with cpu.shares 256", b)
	}
	gw, err := srv.G.limits.cpuGroups()
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, d := range gw.Dirs() {
		g, _ := filepath.Glob(filepath.Join(d, "held-*"))
		groups = append(groups, g...)
	}
	want := map[string]string{"cpu.shares": "256", "cpu.weight": strconv.FormatInt(cpulimit.WeightFromShares(256), 10),
		"memory.soft_limit_in_bytes": "67108864", "memory.min": "67108864"}
	found := 0
	for _, g := range groups {
		for file, v := range want {
			b, err := os.ReadFile(filepath.Join(g, file))
			if err != nil {
				continue
			}
			found++
			if got := strings.TrimSpace(string(b)); got != v {
				t.Errorf("%s/%s = %s, want %s", g, file, got, v)
			}
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the request files in the instance's groups %v, want 2 (cpu and memory)", found, groups)
	}
	if code, _, _ := do(t, "DELETE", srv.URL()+"/system/functions", `{"functionName":"held"}`, nil); code != 202 {
		t.Fatalf("remove: %d", code)
	}
	for _, g := range groups {
		if !eventually(10*time.Second, func() bool { _, err := os.Stat(g); return errors.Is(err, os.ErrNotExist) }) {
			t.Errorf("the stopped instance's group %s stays", g)
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

// Where the gateway can create no cgroup, each field that needs one is
// refused naming itself and the reason, and a function without them is
// not.
func TestFieldsNeedingACgroupAreRefusedWithoutOne(t *testing.T) {
	l := newLimits(prometheus.NewRegistry())
	l.cpuOnce.Do(func() { l.cpuErr = errors.New("the gateway does not run as root") })
	for field, f := range map[string]stack.Function{
		"limits.cpu":      {Limits: stack.Resources{CPU: "500m"}},
		"requests.cpu":    {Requests: stack.Resources{CPU: "250m"}},
		"requests.memory": {Requests: stack.Resources{Memory: "64Mi"}},
	} {
		err := l.refuseUnenforceable(f)
		if err == nil || !strings.HasPrefix(err.Error(), field+" cannot be enforced") || !strings.Contains(err.Error(), "not run as root") {
			t.Errorf("%s: %v, want a refusal naming it and the reason", field, err)
		}
	}
	if err := l.refuseUnenforceable(stack.Function{Limits: stack.Resources{Memory: "64Mi"}}); err != nil {
		t.Errorf("a memory limit (the watchdog's, no cgroup) refused: %v", err)
	}
}
