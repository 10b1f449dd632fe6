package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The pinned versions. hack/controlplane/{etcd,kube,kwok}/go.mod pin the same
// ones; TestVersionsMatchHackModules keeps the two in step.
const (
	EtcdVersion       = "v3.7.3"
	KubernetesVersion = "v1.37.2"
	KwokVersion       = "v0.8.0"
)

// Start's errors, checked with errors.Is.
var (
	// ErrMissingBinaries means the cache lacks a control-plane binary or a
	// kwok stage file; `make controlplane` builds them.
	ErrMissingBinaries = errors.New("control-plane binaries missing")
	// ErrPortInUse means Options.Port is taken.
	ErrPortInUse = errors.New("port in use")
	// ErrComponentExited means a component exited during start-up; the
	// error quotes the end of its log.
	ErrComponentExited = errors.New("component exited early")
)

// binaries are the programs hack/build-controlplane.sh puts in CacheDir()/bin.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// stageFiles are the kwok stages the build script copies from the kwok module
// into CacheDir()/stages.
var stageFiles = []string{
	"node-initialize.yaml",
	"node-heartbeat-with-lease.yaml",
	"pod-ready.yaml",
	"pod-complete.yaml",
	"pod-delete.yaml",
}

// VersionKey names the cache folder of this set of versions. It must match the
// key hack/build-controlplane.sh computes.
func VersionKey() string {
	return "etcd-" + EtcdVersion + "_kube-" + KubernetesVersion + "_kwok-" + KwokVersion
}

// CacheDir is where `make controlplane` puts the binaries (bin/) and the kwok
// stages (stages/): $GANTRY_CACHE/controlplane/<VersionKey>, with
// GANTRY_CACHE defaulting to $HOME/.cache/gantry.
func CacheDir() string {
	return filepath.Join(gantryCache(), "controlplane", VersionKey())
}

// gantryCache is $GANTRY_CACHE, or $HOME/.cache/gantry.
func gantryCache() string {
	if root := os.Getenv("GANTRY_CACHE"); root != "" {
		return root
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "gantry")
}

func binPath(name string) string { return filepath.Join(CacheDir(), "bin", name) }

// RequireBinaries returns an error wrapping ErrMissingBinaries that names
// every missing file and the command that builds them.
func RequireBinaries() error {
	dir := CacheDir()
	var missing []string
	for _, f := range append(prefixed("bin/", binaries), prefixed("stages/", stageFiles)...) {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || (strings.HasPrefix(f, "bin/") && fi.Mode()&0o111 == 0) {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w from %s: %s\nrun `make controlplane` (./hack/build-controlplane.sh; about 15 minutes cold on 2 cores) to build them",
		ErrMissingBinaries, dir, strings.Join(missing, ", "))
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}
