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
		{[]string{"--app", "synthetic", "--exec-mean", "-1s"}, "must be in (0, 1h]"},
	} {
		_, _, code, err := gantry(t, append([]string{"sim"}, c.args...)...)
		if code != 2 || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, err %v; want exit 2 and %q", c.args, code, err, c.want)
		}
	}
}
