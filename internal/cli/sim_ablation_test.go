package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/experiment"
	"gantry.dev/gantry/pkg/report"
)

// One command runs the ablation and writes its table as JSON and
// markdown: here one variant on a matrix of 2-second runs (with the
// yardsticks of every condition, which cost the most).
func TestSimAblationWritesTheTableAsJSONAndMarkdown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator")
	}
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, _, err := gantry(t, "sim", "--experiment", "ablation", "--policies", "oracle-first-fit",
		"--duration", "2s", "--large-duration", "2s", "--out", out)
	if err != nil {
		t.Fatalf("%v\nstderr: %s", err, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, experiment.AblationFile))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Rows []experiment.AblationRow }
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range got.Rows {
		seen[r.Split+" "+r.Variant] = r.Runs
	}
	for _, split := range []string{"stable", "twitter", experiment.LargeTraceLabel, experiment.AzureSpikesLabel} {
		for _, v := range []string{"oracle-first-fit"} {
			want := map[string]int{"stable": 30, "twitter": 15, experiment.LargeTraceLabel: 15, experiment.AzureSpikesLabel: 5}[split]
			if seen[split+" "+v] != want {
				t.Errorf("%s %s: %d runs, want %d (rows %v)", split, v, seen[split+" "+v], want, got.Rows)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| variant | runs | live ÷ oracle |", "| oracle-first-fit | 5 |"} {
		if !strings.Contains(string(md), s) || !strings.Contains(stdout, s) {
			t.Errorf("report.md or stdout lacks %q\nstdout:\n%s", s, stdout)
		}
	}
	if _, _, code, _ := gantry(t, "sim", "--experiment", "ablation", "--app", "image-compression"); code != 2 {
		t.Errorf("--app with --experiment ablation: exit %d, want 2", code)
	}
}
