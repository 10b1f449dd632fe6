package orchbench

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A folder without manifests (the benchmark run outside the repository) is
// an error naming it at once, not a minute's wait for permissions never
// granted.
func TestReadManifestsRefusesAFolderWithoutManifests(t *testing.T) {
	_, err := readManifests(filepath.Join(t.TempDir(), "rbac"))
	if err == nil || !strings.Contains(err.Error(), "--config-dir") {
		t.Fatalf("got %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	objs, err := readManifests(filepath.Join(filepath.Dir(file), "..", "..", "config", "rbac"))
	if err != nil || len(objs) == 0 {
		t.Fatalf("the shipped RBAC: %d objects, %v", len(objs), err)
	}
}
