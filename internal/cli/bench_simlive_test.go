package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/liverun"
	"gantry.dev/gantry/pkg/policy"
)

// Every bad flag of bench simlive is a usage error (exit 2), reported
// before anything is started.
func TestBenchSimLiveFlagsAreUsageErrors(t *testing.T) {
	cases := [][]string{
		{"--app", "no-such-app"},
		{"--policy", "no-such-policy"},
		{"--policy", "oracle"},
		{"--trace", "no-such-trace"},
		{"--dist", "no-such-dist"},
		{"--rate", "0"},
		{"--rate", "-1"},
		{"--rate", "NaN"},
		{"--rate", "1e9"},
		{"--duration", "500ms"},
		{"--duration", "48h"},
		{"--start-delay", "-1s"},
		{"--start-delay", "11m"},
		{"--seed", "-1"},
		{"--capacity", "-1"},
		{"--runs", "0"},
		{"--runs", "101"},
		{"--sim-seeds", "0"},
		{"--tick", "0"},
		{"--tick", "20s"},
		{"--window", "500ms"},
		{"--idle-timeout", "0"},
		{"--no-such-flag"},
		{"extra-arg"},
	}
	assertUsageErrors(t, []string{"bench", "simlive"}, cases)
}

// runGantry runs the root command with args and returns its error and
// standard output.
func runGantry(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// --policy takes every name policy.Names() lists but the oracle, which it
// refuses with a usage error (exit 2) of one line that says why; an
// unknown name's error lists the valid ones.
func TestBenchSimLivePolicies(t *testing.T) {
	for _, name := range policy.Names() {
		var cc liverun.CompareConfig
		cmd := &cobra.Command{}
		simLiveFlags(cmd, &cc)
		if err := cmd.ParseFlags([]string{"--policy", name}); err != nil {
			t.Fatal(err)
		}
		err := validateSimLive(&cc)
		if name == "oracle" {
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "clairvoyant") || strings.Contains(err.Error(), "\n") {
				t.Errorf("--policy oracle: %v, want a one-line usage error saying it is clairvoyant", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("--policy %s with the other flags' defaults: %v", name, err)
		}
	}
	_, err := runGantry(t, "bench", "simlive", "--policy", "oracle")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "live gateway cannot honour") {
		t.Errorf("gantry bench simlive --policy oracle: %v", err)
	}
	_, err = runGantry(t, "bench", "simlive", "--policy", "no-such-policy")
	if !errors.As(err, &ue) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("unknown policy: %v, want a one-line usage error", err)
	}
	for _, name := range policy.Names() {
		if name != "oracle" && !strings.Contains(err.Error(), name) {
			t.Errorf("unknown policy's error does not list %s: %v", name, err)
		}
	}
}

// --summarize reads comparison folders and writes one table; it takes
// folders and no flag of a run.
func TestBenchSimLiveSummarize(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for _, c := range []struct {
		policy    string
		instances float64
	}{{"gantry", 10.99}, {"cypress", 11.01}} {
		dir := filepath.Join(root, c.policy)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		js := fmt.Sprintf(`{"app":"email-categorization","policy":%q,"trace":"twitter","rate":10,"runs":3,
			"live":{"avg_containers":%v,"slo_compliance":0.98},
			"sim_expected":{"seeds":21,"mean":{"avg_containers":10,"slo_compliance":0.98}}}`, c.policy, c.instances)
		if err := os.WriteFile(filepath.Join(dir, "comparison.json"), []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	out := filepath.Join(root, "summary")
	stdout, err := runGantry(t, append([]string{"bench", "simlive", "--summarize", "--out", out}, dirs...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| cypress | 3 | 10.00 | 11.01 | +10.1% | 98.00% | 98.00% | +0.00 | **no** |",
		"| gantry | 3 | 10.00 | 10.99 | +9.9% | 98.00% | 98.00% | +0.00 | yes |", "1 of 2 within tolerance."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"summary.md", "summary.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	stdout, err = runGantry(t, append([]string{"bench", "simlive", "--summarize", "--json"}, dirs...)...)
	var s liverun.Summary
	if err != nil || json.Unmarshal([]byte(stdout), &s) != nil || len(s.Rows) != 2 || s.Within != 1 {
		t.Errorf("--json: %v, %s", err, stdout)
	}

	cases := [][]string{{"--summarize"}}
	for _, name := range simLiveRunFlags {
		f := newBenchSimLiveCmd().Flags().Lookup(name)
		value := f.DefValue
		cases = append(cases, []string{"--summarize", "--" + name + "=" + value, dirs[0]})
	}
	assertUsageErrors(t, []string{"bench", "simlive"}, cases)
	// simLiveRunFlags is every flag of a run: all but these.
	var flags []string
	for _, line := range strings.Split(newBenchSimLiveCmd().Flags().FlagUsages(), "\n") {
		if m := flagName.FindStringSubmatch(line); m != nil {
			flags = append(flags, m[1])
		}
	}
	flags = slices.DeleteFunc(flags, func(f string) bool { return slices.Contains([]string{"summarize", "out", "json"}, f) })
	slices.Sort(flags)
	if want := slices.Sorted(slices.Values(simLiveRunFlags)); !slices.Equal(flags, want) {
		t.Errorf("flags of a run %v, simLiveRunFlags %v", flags, want)
	}
}

var flagName = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z-]+)`)
