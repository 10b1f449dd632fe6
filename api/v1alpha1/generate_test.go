package v1alpha1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates the deepcopy code and the CRD into
// a temp folder, with the same controller-gen invocation as go:generate, and
// fails if the committed files differ: run `make generate`.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds controller-gen; skipped under -short")
	}
	out := t.TempDir()
	cmd := exec.Command("go", "tool", "controller-gen", "object", "crd:generateEmbeddedObjectMeta=true",
		"paths=.", "output:object:dir="+out, "output:crd:dir="+out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, msg)
	}
	for fresh, committed := range map[string]string{
		"zz_generated.deepcopy.go":    "zz_generated.deepcopy.go",
		"gantry.dev_rtresources.yaml": filepath.Join("..", "..", "config", "crd", "bases", "gantry.dev_rtresources.yaml"),
	} {
		want, err1 := os.ReadFile(filepath.Join(out, fresh))
		got, err2 := os.ReadFile(committed)
		if err1 != nil || err2 != nil {
			t.Fatalf("read %s: %v %v", fresh, err1, err2)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate` and commit the result", committed)
		}
	}
}
