package localcluster

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The hack modules pin the versions the build script builds; the constants
// here must name the same ones, or RequireBinaries looks in the wrong folder.
func TestVersionsMatchHackModules(t *testing.T) {
	for _, tc := range []struct{ module, path, want string }{
		{"etcd", "go.etcd.io/etcd/server/v3", EtcdVersion},
		{"kube", "k8s.io/kubernetes", KubernetesVersion},
		{"kwok", "sigs.k8s.io/kwok", KwokVersion},
	} {
		gomod, err := os.ReadFile(filepath.Join("..", "..", "hack", "controlplane", tc.module, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(tc.path) + `\s+(v\S+)`)
		m := re.FindSubmatch(gomod)
		if m == nil || string(m[1]) != tc.want {
			t.Errorf("hack/controlplane/%s/go.mod requires %s %s; localcluster expects %s", tc.module, tc.path, m, tc.want)
		}
	}
}

func TestBuildScriptUsesTheSameVersionKey(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "build-controlplane.sh"))
	if err != nil {
		t.Fatal(err)
	}
	const keyLine = `key="etcd-${etcd_version}_kube-${kube_version}_kwok-${kwok_version}"`
	if !strings.Contains(string(script), keyLine) {
		t.Errorf("hack/build-controlplane.sh no longer computes %s; VersionKey() is %s", keyLine, VersionKey())
	}
}

func TestRequireBinariesNamesEachMissingFileAndTheMakeTarget(t *testing.T) {
	t.Setenv("GANTRY_CACHE", t.TempDir())
	err := RequireBinaries()
	if !errors.Is(err, ErrMissingBinaries) {
		t.Fatalf("RequireBinaries() = %v, want ErrMissingBinaries", err)
	}
	for _, want := range append(append([]string{"make controlplane"}, binaries...), stageFiles...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestStartWithoutBinariesFailsBeforeStartingAnything(t *testing.T) {
	t.Setenv("GANTRY_CACHE", t.TempDir())
	if _, err := Start(t.Context(), Options{}); !errors.Is(err, ErrMissingBinaries) {
		t.Fatalf("Start() = %v, want ErrMissingBinaries", err)
	}
}
