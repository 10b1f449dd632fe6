package coldstartbench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// floorSource is the floor: the least a Go HTTP server does from exec to
// its first answer. It takes a passed socket as gantry-fn does
// (pkg/listenfd), so that both modes compare like with like.
const floorSource = `// The cold-start floor of gantry bench coldstart: a minimal Go HTTP server.
package main

import (
	"net"
	"net/http"
	"os"
	"strconv"
)

func main() {
	var ln net.Listener
	var err error
	if os.Getenv("LISTEN_FDS") == "1" && os.Getenv("LISTEN_PID") == strconv.Itoa(os.Getpid()) {
		ln, err = net.FileListener(os.NewFile(3, "listen-fd-3"))
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	}))
}
`

// buildFloor writes the floor's source into the cache and builds it
// there, once per version of the source.
func buildFloor(ctx context.Context, cache string) (string, error) {
	sum := sha256.Sum256([]byte(floorSource))
	dir := filepath.Join(cache, "floor-"+hex.EncodeToString(sum[:6]))
	bin := filepath.Join(dir, "floor")
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, body := range map[string]string{"go.mod": "module coldstartfloor\n\ngo 1.22\n", "main.go": floorSource} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	// Built under a temporary name, then renamed: a run interrupted
	// mid-build leaves no half binary that a later run would take.
	if err := goBuild(ctx, dir, bin+".tmp", "."); err != nil {
		return "", fmt.Errorf("build the floor server: %w", err)
	}
	return bin, os.Rename(bin+".tmp", bin)
}

// buildFnRuntime builds gantry-fn from the module's source into the
// cache; go build rewrites it only when the source changed.
func buildFnRuntime(ctx context.Context, cache, module string) (string, error) {
	bin := filepath.Join(cache, "gantry-fn")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	if err := goBuild(ctx, module, bin, "./examples/functions/cmd/gantry-fn"); err != nil {
		return "", fmt.Errorf("build gantry-fn: %w", err)
	}
	return bin, nil
}

func goBuild(ctx context.Context, dir, out, pkg string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go tool is needed to build: %w", err)
	}
	cmd := exec.CommandContext(ctx, gobin, "build", "-buildvcs=false", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// ModuleRoot finds the Gantry module's source at or above dir, or "".
func ModuleRoot(dir string) string {
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && len(b) > 0 && moduleLine(string(b)) == "gantry.dev/gantry" {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func moduleLine(gomod string) string {
	var mod string
	_, _ = fmt.Sscanf(gomod, "module %s", &mod)
	return mod
}
