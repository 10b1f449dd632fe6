package knativeinstall

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ServingVersion is the Knative Serving module (Knative 1.23.0) that
// hack/knative/go.mod pins; TestVersionMatchesHackModule keeps them in step.
const ServingVersion = "v0.50.0"

// ErrMissingBuild means the cache lacks a Knative binary or the assembled
// manifests; `make knative` builds them.
var ErrMissingBuild = errors.New("knative build missing")

// Components are Knative Serving's control-plane Deployments in
// knative-serving, each running the binary of the same name.
var Components = []string{"controller", "webhook", "autoscaler", "activator"}

// binaries are what hack/build-knative.sh puts in BinDir(): the components
// and queue-proxy (cmd/queue), the sidecar of every Revision's pods.
var binaries = append(append([]string{}, Components...), "queue")

// Namespace is where Knative Serving's components run.
const Namespace = "knative-serving"

// VersionKey names the cache folder of this version. It must match the key
// hack/build-knative.sh computes.
func VersionKey() string { return "serving-" + ServingVersion }

// CacheDir is where `make knative` puts the binaries (bin/) and the
// manifests (config/): $GANTRY_CACHE/knative/<VersionKey>, with
// GANTRY_CACHE defaulting to $HOME/.cache/gantry.
func CacheDir() string { return filepath.Join(gantryCache(), "knative", VersionKey()) }

// BinDir holds the built binaries.
func BinDir() string { return filepath.Join(CacheDir(), "bin") }

// ConfigDir holds the assembled manifests (serving's config/core layout).
func ConfigDir() string { return filepath.Join(CacheDir(), "config") }

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

// RequireBuild returns an error wrapping ErrMissingBuild that names every
// missing file and the command that builds them.
func RequireBuild() error {
	var missing []string
	for _, b := range binaries {
		fi, err := os.Stat(filepath.Join(BinDir(), b))
		if err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, "bin/"+b)
		}
	}
	// The build script writes .complete last, once the folder is whole.
	if _, err := os.Stat(filepath.Join(ConfigDir(), ".complete")); err != nil {
		missing = append(missing, "config/")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w from %s: %s\nrun `make knative` (./hack/build-knative.sh) to build them",
		ErrMissingBuild, CacheDir(), strings.Join(missing, ", "))
}

// ImagePrefix is how Knative's manifests name the images of its commands.
const ImagePrefix = "ko://knative.dev/serving/cmd/"

// Images maps each Knative image (ImagePrefix + the command: the four
// components and queue-proxy's "queue") to its binary in binDir, as
// processnode.Config.Images wants it.
func Images(binDir string) map[string][]string {
	m := make(map[string][]string, len(binaries))
	for _, b := range binaries {
		m[ImagePrefix+b] = []string{filepath.Join(binDir, b)}
	}
	return m
}
