package backend

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/stack"
)

// The local runtime honours a constraint this machine meets and refuses,
// with the reason, every field it cannot carry out.
func TestLocalRuntimeRefusesWhatItCannotHonour(t *testing.T) {
	ok := stack.Function{Name: "f", Command: "cat", Namespace: "staging",
		Constraints: []string{"node.platform.os == " + runtime.GOOS, "kubernetes.io/arch=" + runtime.GOARCH}}
	if err := LocalRefusal(ok); err != nil {
		t.Fatalf("a function this machine can run: %v", err)
	}
	cases := map[string]func(*stack.Function){
		"secrets":                func(f *stack.Function) { f.Secrets = []string{"s"} },
		"readOnlyRootFilesystem": func(f *stack.Function) { f.ReadOnlyRootFilesystem = true },
		"limits":                 func(f *stack.Function) { f.Limits.Memory = "1Gi" },
		"requests":               func(f *stack.Function) { f.Requests.CPU = "1" },
		"this machine's":         func(f *stack.Function) { f.Constraints = []string{"node.platform.os == plan9"} },
		"no label":               func(f *stack.Function) { f.Constraints = []string{"disk=ssd"} },
		"want KEY":               func(f *stack.Function) { f.Constraints = []string{"linux"} },
	}
	for reason, mutate := range cases {
		f := ok
		mutate(&f)
		if err := LocalRefusal(f); !errors.Is(err, stack.ErrInvalid) || !strings.Contains(err.Error(), reason) {
			t.Errorf("%s: %v", reason, err)
		}
	}
}
