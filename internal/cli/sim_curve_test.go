package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/slocurve"
)

// --slo-curve runs one policy once per SLO target and writes the curve's
// JSON and PNG; it refuses what it cannot run.
func TestSimSLOCurve(t *testing.T) {
	out := t.TempDir()
	base := []string{"sim", "--app", "sentiment-analysis", "--dist", "uniform", "--trace", "poisson", "--rate", "8",
		"--duration", "2m", "--nodes", "1", "--cores-per-node", "32"}
	stdout, _, code, err := gantry(t, append(base, "--policies", "gantry", "--slo-curve", "90,99.9", "--out", out)...)
	if err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	data, err := os.ReadFile(filepath.Join(out, slocurve.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var c slocurve.Curve
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Points) != 2 || math.Abs(c.Points[0].Target-0.9) > 1e-9 || math.Abs(c.Points[1].Target-0.999) > 1e-9 {
		t.Fatalf("points %+v, want targets 0.9 and 0.999", c.Points)
	}
	// A stricter target never gets fewer containers.
	if c.Points[1].AvgContainers < c.Points[0].AvgContainers {
		t.Errorf("99.9%%: %.2f containers, 90%%: %.2f", c.Points[1].AvgContainers, c.Points[0].AvgContainers)
	}
	if fi, err := os.Stat(filepath.Join(out, slocurve.PNGFile)); err != nil || fi.Size() == 0 {
		t.Errorf("no %s: %v", slocurve.PNGFile, err)
	}
	if !strings.Contains(stdout, "99.9%") {
		t.Errorf("stdout %q lists no 99.9%% target", stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policies", "gantry,cypress", "--slo-curve", "99", "--out", out}, "exactly one"},
		{[]string{"--policies", "gantry", "--slo-curve", "99"}, "give --out"},
		{[]string{"--policies", "gantry", "--slo-curve", "99,100", "--out", out}, "percentages in (0, 100)"},
		{[]string{"--policies", "gantry", "--slo-target", "100"}, "--slo-target must be"},
		{[]string{"--policies", "gantry", "--slo-target", "0.999"}, "--slo-target must be a percentage in (1, 100), e.g. 99.9"},
	} {
		_, _, code, err := gantry(t, append(base, c.args...)...)
		if code != 2 || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, err %v; want exit 2 and %q", c.args, code, err, c.want)
		}
	}
}

// --frontier runs the oracle, the fixed pool at --slo-target and
// oracle-predicted once per headroom, told the rate --predicted-lead
// ahead; more headroom never holds fewer containers, and it refuses what
// it cannot run.
func TestSimFrontier(t *testing.T) {
	out := t.TempDir()
	base := []string{"sim", "--app", "sentiment-analysis", "--dist", "uniform", "--trace", "poisson", "--rate", "8",
		"--duration", "2m", "--nodes", "1", "--cores-per-node", "32"}
	stdout, _, code, err := gantry(t, append(base, "--policies", "oracle-predicted", "--slo-target", "99",
		"--frontier=-20,0,50", "--predicted-lead", "2s", "--out", out)...)
	if err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	data, err := os.ReadFile(filepath.Join(out, slocurve.FrontierFile))
	if err != nil {
		t.Fatal(err)
	}
	var f slocurve.Frontier
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Predicted) != 3 || f.Oracle <= 0 || f.FixedPool <= 0 || f.FixedPoolSLO < 0.99 {
		t.Fatalf("frontier %+v: want 3 points, an oracle and a fixed pool reaching 99%%", f)
	}
	if f.Predicted[0].Headroom != -0.2 || f.Predicted[2].AvgContainers < f.Predicted[1].AvgContainers {
		t.Errorf("points %+v: want headroom -0.2 first and no fewer containers at +50%% than at 0", f.Predicted)
	}
	if f.Reached >= 0 && f.Predicted[f.Reached].Compliance < 0.99 {
		t.Errorf("reached point %+v is below the target", f.Predicted[f.Reached])
	}
	if !strings.Contains(stdout, "fixed pool at 99.000%") {
		t.Errorf("stdout %q has no fixed pool line", stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policies", "gantry", "--frontier", "0"}, "--policies oracle-predicted"},
		{[]string{"--policies", "oracle-predicted", "--frontier=-95"}, "headrooms in percent"},
		{[]string{"--policies", "oracle-predicted", "--frontier", "0", "--predicted-lead", "2h"}, "--predicted-lead must be"},
		{[]string{"--policies", "oracle-predicted", "--predicted-lead", "2s"}, "only applies to --frontier"},
	} {
		_, _, code, err := gantry(t, append(base, c.args...)...)
		if code != 2 || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, err %v; want exit 2 and %q", c.args, code, err, c.want)
		}
	}
}
