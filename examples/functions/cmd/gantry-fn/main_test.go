package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The slim runtime exists because the Kubernetes libraries' package
// initialisation dominates a gantry instance's start: it must link none of
// them, nor anything else heavy at init, or it is the gantry binary again.
func TestSlimRuntimeLinksNoKubernetes(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go tool: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{"k8s.io/", "sigs.k8s.io/", "github.com/prometheus/", "github.com/nats-io/",
		"github.com/spf13/cobra", "google.golang.org/protobuf", "gantry.dev/gantry/internal/"}
	linked := map[string]bool{}
	for _, d := range deps {
		linked[d] = true
		for _, bad := range forbidden {
			if strings.HasPrefix(d, bad) {
				t.Errorf("gantry-fn links %s", d)
			}
		}
	}
	// And it is the example functions' runtime, not an empty program.
	for _, want := range []string{"gantry.dev/gantry/examples/functions", "gantry.dev/gantry/examples/functions/fnrun"} {
		if !linked[want] {
			t.Errorf("gantry-fn does not link %s", want)
		}
	}
}

// Bad arguments exit 2, as `gantry fn` does.
func TestSlimRuntimeUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{}, {"no-such-function"}, {"--no-such-flag"}, {"sentiment", "--app", "x"}, {"--list", "sentiment"}} {
		if code := run(args); code != 2 {
			t.Errorf("gantry-fn %q exited %d, want 2", args, code)
		}
	}
}
