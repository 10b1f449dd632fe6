package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// A user's own function from a few numbers: Poisson rate, execution-time
// distribution and mean, cold start.
func TestSimRunsASyntheticFunctionFromFlags(t *testing.T) {
	stdout, stderr, _, err := gantry(t, "sim", "--app", "synthetic", "--exec-dist", "uniform", "--exec-mean", "40ms",
		"--cold-start", "300ms", "--rate", "50", "--duration", "1m", "--policies", "commercial,gantry", "--json")
	if err != nil {
		t.Fatalf("%v\nstderr: %s", err, stderr)
	}
	var got struct{ Runs []map[string]any }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if len(got.Runs) != 2 || got.Runs[0]["app"] != "synthetic" || got.Runs[0]["dist"] != "uniform" {
		t.Fatalf("runs %v", got.Runs)
	}
	if n := got.Runs[0]["requests"].(float64); n < 2700 || n > 3300 {
		t.Errorf("requests %v, want about 3000", n)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--exec-mean", "10ms"}, "need --app synthetic"},
		{[]string{"--app", "synthetic", "--dist", "light"}, "not --dist"},
		{[]string{"--app", "synthetic", "--exec-dist", "pareto"}, `"pareto"`},
		{[]string{"--app", "synthetic", "--exec-mean", "-1s"}, "must be in [1µs, 1h]"},
	} {
		_, _, code, err := gantry(t, append([]string{"sim"}, c.args...)...)
		if code != 2 || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, err %v; want exit 2 and %q", c.args, code, err, c.want)
		}
	}
}

// SimFaaS's example case runs from the command line: exponential
// execution (1.991 s) and cold starts (253 ms, its cold minus warm service
// time), 0.9 requests/s, a cold boot and its 600 s expiration threshold
// as --keep-alive. Over a day it lands on the figures SimFaaS's README
// prints for that case (cold-start probability 0.0014, 7.6612 instances
// on average; its run is 10⁶ s). The keep-alive is honoured (one of 1 s
// makes most requests cold) and so is the cold boot (the first requests
// pay cold starts a prewarmed cluster does not).
func TestSimRunsSimFaaSCaseFromFlags(t *testing.T) {
	run := func(extra ...string) map[string]any {
		t.Helper()
		args := append([]string{"sim", "--app", "synthetic", "--exec-dist", "exp", "--exec-mean", "1991ms", "--rate", "0.9",
			"--cold-start", "253ms", "--cold-start-dist", "exp", "--policies", "commercial", "--json"}, extra...)
		stdout, _, _, err := gantry(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", extra, err)
		}
		var got struct{ Runs []map[string]any }
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Runs) != 1 {
			t.Fatalf("%v: %s (%v)", extra, stdout, err)
		}
		return got.Runs[0]
	}
	coldShare := func(r map[string]any) float64 { return r["cold_starts"].(float64) / r["requests"].(float64) }
	long := run("--keep-alive", "10m", "--cold-boot", "--duration", "24h")
	short := run("--keep-alive", "1s", "--cold-boot", "--duration", "1h")
	warm := run("--keep-alive", "10m", "--duration", "24h")
	if p := coldShare(long); p < 0.0007 || p > 0.0021 {
		t.Errorf("10 min keep-alive: cold-start probability %.4f, want SimFaaS's 0.0014 within 50%% (about 110 cold starts)", p)
	}
	if n := long["avg_containers"].(float64); n < 0.95*7.6612 || n > 1.05*7.6612 {
		t.Errorf("10 min keep-alive: %.3f instances on average, want SimFaaS's 7.6612 within 5%%", n)
	}
	if p := coldShare(short); p < 0.3 {
		t.Errorf("1 s keep-alive: %.2f%% of requests cold, want over 30%%", 100*p)
	}
	if long["avg_containers"].(float64) <= short["avg_containers"].(float64) {
		t.Errorf("a 10 min keep-alive holds %v instances, a 1 s one %v", long["avg_containers"], short["avg_containers"])
	}
	if c, w := long["cold_starts"].(float64), warm["cold_starts"].(float64); c <= w {
		t.Errorf("cold boot: %v cold starts, prewarmed %v; want more from empty", c, w)
	}
	if long["bound"].(float64) != 0 {
		t.Errorf("bound %v reported under drawn cold starts, which it does not hold for", long["bound"])
	}
}
