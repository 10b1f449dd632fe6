package backend

import (
	"fmt"
	"runtime"
	"strings"

	"gantry.dev/gantry/pkg/stack"
)

// LocalRefusal is the local runtime's answer to OpenFaaS's fields: nil
// when it honours every field f sets, else the reason it cannot, as an
// ErrInvalid (HTTP 400), so that no field is accepted and then ignored.
func LocalRefusal(f stack.Function) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: function %q: %s", stack.ErrInvalid, f.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case len(f.Secrets) > 0:
		return bad("secrets are not supported by the local runtime; pass values in envVars")
	case f.ReadOnlyRootFilesystem:
		return bad("readOnlyRootFilesystem: the local runtime runs instances as processes that share this machine's filesystem, and cannot make it read-only for them")
	case !f.Limits.IsZero():
		return bad("limits: the local runtime does not enforce memory or CPU limits")
	case !f.Requests.IsZero():
		return bad("requests: the local runtime places every instance on this machine; there is no scheduler to reserve resources with")
	}
	for _, c := range f.Constraints {
		if err := localConstraint(c); err != nil {
			return bad("constraint %q: %v", c, err)
		}
	}
	return nil
}

// localConstraint checks a placement constraint against this machine, the
// local runtime's only node. It knows the operating system and
// architecture, in Swarm's form ("node.platform.os == linux") and in
// Kubernetes' ("kubernetes.io/os=linux"); any other says nothing this
// runtime can check, and is refused.
func localConstraint(c string) error {
	key, want, ok := splitConstraint(c)
	if !ok {
		return fmt.Errorf("want KEY == VALUE or KEY=VALUE")
	}
	var have string
	switch key {
	case "node.platform.os", "kubernetes.io/os", "beta.kubernetes.io/os":
		have = runtime.GOOS
	case "node.platform.arch", "kubernetes.io/arch", "beta.kubernetes.io/arch":
		have = runtime.GOARCH
	default:
		return fmt.Errorf("the local runtime's one node has no label %q (it knows the os and arch)", key)
	}
	if have != want {
		return fmt.Errorf("this machine's %s is %s", key, have)
	}
	return nil
}

// splitConstraint reads "KEY == VALUE" or "KEY=VALUE".
func splitConstraint(c string) (key, value string, ok bool) {
	if k, v, found := strings.Cut(c, "=="); found {
		key, value = k, v
	} else if key, value, ok = strings.Cut(c, "="); !ok {
		return "", "", false
	}
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	return key, value, key != "" && value != "" && !strings.ContainsAny(key+value, "=!")
}
