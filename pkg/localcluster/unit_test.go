package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestWithDelaySetsThePodReadyStageDelay(t *testing.T) {
	stage := []byte("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: pod-ready\nspec:\n  next: {}\n")
	out, err := withDelay(stage, 1500)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Spec struct {
			Delay struct {
				DurationMilliseconds int64 `json:"durationMilliseconds"`
			} `json:"delay"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Spec.Delay.DurationMilliseconds != 1500 {
		t.Errorf("delay = %d ms, want 1500:\n%s", obj.Spec.Delay.DurationMilliseconds, out)
	}
}

func TestOptionsRejectBadCapacity(t *testing.T) {
	for _, o := range []Options{{NodeMemory: "lots"}, {Nodes: -1}, {Port: 70000}} {
		if err := o.withDefaults().validate(); err == nil {
			t.Errorf("validate(%+v) = nil, want an error", o)
		}
	}
}

func TestTailFileKeepsTheLastLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := tailFile(path, 3)
	if want := "    line 37\n    line 38\n    line 39"; got != want {
		t.Errorf("tailFile = %q, want %q", got, want)
	}
}

func TestOrphanedTempDirsAreRemoved(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dead, err := os.MkdirTemp("", tempDirPattern)
	if err != nil {
		t.Fatal(err)
	}
	live, err := os.MkdirTemp("", tempDirPattern)
	if err != nil {
		t.Fatal(err)
	}
	// Pid 0x3fffffff is above pid_max, so no process has it.
	os.WriteFile(filepath.Join(dead, ownerFile), []byte("1073741823"), 0o600)
	os.WriteFile(filepath.Join(live, ownerFile), []byte(fmt.Sprint(os.Getpid())), 0o600)
	removeOrphanedTempDirs()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("folder of a dead owner still exists (%v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("folder of a live owner was removed: %v", err)
	}
}
