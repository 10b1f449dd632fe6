package backend

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// FnRuntimeName is the slim example-functions runtime's file name
// (examples/functions/cmd/gantry-fn), which `make build` puts beside the
// gantry binary.
const FnRuntimeName = "gantry-fn"

// NoFnRuntime as LocalConfig.FnRuntime runs "gantry fn" commands with this
// binary even when the slim runtime is there.
const NoFnRuntime = "none"

// FindFnRuntime returns the slim runtime beside the gantry binary self,
// or "" and why not. One built from another commit than self is not used:
// it could serve other functions than `gantry fn` would.
func FindFnRuntime(self string) (string, error) {
	path := filepath.Join(filepath.Dir(self), FnRuntimeName)
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return "", err
	case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	if err := sameRevision(path); err != nil {
		return "", err
	}
	return path, nil
}

// sameRevision refuses a runtime whose recorded VCS revision differs from
// this binary's. A binary without one (go run, tests) has nothing to
// compare, and is trusted.
func sameRevision(path string) error {
	mine, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	theirs, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	a, b := vcsRevision(mine), vcsRevision(theirs)
	if a != "" && b != "" && a != b {
		return fmt.Errorf("%s was built from %s, this binary from %s: run make build", path, b, a)
	}
	return nil
}

func vcsRevision(bi *debug.BuildInfo) string {
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+modified"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// fnArgs reports whether argv runs an example function through this binary
// ("gantry fn ..."), and the arguments the slim runtime takes for it.
func fnArgs(argv []string) ([]string, bool) {
	if len(argv) < 2 || argv[0] != "gantry" || argv[1] != "fn" {
		return nil, false
	}
	return argv[2:], true
}

// fnLine is fnArgs for a shell line: the rest of the line after "gantry fn".
func fnLine(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), "gantry fn")
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return "", false
	}
	return rest, true
}
