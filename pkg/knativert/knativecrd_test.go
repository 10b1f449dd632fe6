package knativert

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/dynamic"

	"gantry.dev/gantry/config/crd"
)

// knativeServing is the Knative Serving module whose CRDs the tests
// install: the version Gantry's Knative build pins (issue 19).
const knativeServing = "knative.dev/serving@v0.50.0"

var knativeCRDsOnce struct {
	sync.Once
	err error
}

// installKnativeCRDs installs the Revision and PodAutoscaler CRDs from
// Knative Serving's module (config/core/300-resources), located with
// `go mod download`: the module cache has it once anything fetched it, and
// the module proxy serves it otherwise. The knative.dev modules stay out of
// go.mod; the test needs only these two files.
func installKnativeCRDs(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	knativeCRDsOnce.Do(func() {
		dir, err := moduleDir(t.TempDir(), knativeServing)
		if err != nil {
			knativeCRDsOnce.err = err
			return
		}
		for _, f := range []string{"revision.yaml", "podautoscaler.yaml"} {
			manifest, err := os.ReadFile(filepath.Join(dir, "config", "core", "300-resources", f))
			if err == nil {
				err = crd.Install(context.Background(), dyn, manifest)
			}
			if err != nil {
				knativeCRDsOnce.err = err
				return
			}
		}
	})
	if knativeCRDsOnce.err != nil {
		t.Fatalf("install Knative's CRDs: %v", knativeCRDsOnce.err)
	}
}

// moduleDir runs `go mod download -json MOD@VERSION` in an empty folder,
// outside this module so its go.mod is not touched, and returns the
// module's folder in the cache.
func moduleDir(tmp, mod string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", &downloadError{mod, string(out) + string(ee.Stderr), err}
		}
		return "", err
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	if info.Dir == "" {
		return "", &downloadError{mod, info.Error, nil}
	}
	return info.Dir, nil
}

type downloadError struct {
	mod, out string
	err      error
}

func (e *downloadError) Error() string {
	return "go mod download " + e.mod + ": " + e.out
}
