package kube

import (
	"errors"
	"testing"

	"gantry.dev/gantry/pkg/stack"
)

// Limits, requests, readOnlyRootFilesystem and constraints become the
// pod's resources, security context and node selector; what the backend
// cannot carry out is refused.
func TestPodCarriesOpenFaaSFields(t *testing.T) {
	f := testFunction()
	f.Limits = stack.Resources{Memory: "128Mi", CPU: "500m"}
	f.Requests = stack.Resources{Memory: "64Mi"}
	f.ReadOnlyRootFilesystem = true
	f.Constraints = []string{"disk=ssd", "kubernetes.io/arch == amd64"}
	spec := podTemplate(f, 8080).Spec
	c := spec.Containers[0]
	if c.Resources.Limits.Memory().String() != "128Mi" || c.Resources.Limits.Cpu().String() != "500m" ||
		c.Resources.Requests.Memory().String() != "64Mi" || c.Resources.Requests.Cpu().Sign() != 0 {
		t.Fatalf("resources %+v", c.Resources)
	}
	if c.SecurityContext == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Fatal("read-only root filesystem not set")
	}
	if spec.NodeSelector["disk"] != "ssd" || spec.NodeSelector["kubernetes.io/arch"] != "amd64" {
		t.Fatalf("node selector %v", spec.NodeSelector)
	}
	if r := podTemplate(testFunction(), 8080).Spec.Containers[0].Resources; len(r.Limits) != 0 || len(r.Requests) != 0 {
		t.Fatalf("resources without limits: %+v", r)
	}
	for _, bad := range []func(*stack.Function){
		func(f *stack.Function) { f.Namespace = "staging" },
		func(f *stack.Function) { f.Secrets = []string{"s"} },
		func(f *stack.Function) { f.Constraints = []string{"linux"} },
	} {
		g := testFunction()
		bad(&g)
		if err := refusal(g, "fns"); !errors.Is(err, stack.ErrInvalid) {
			t.Errorf("%+v: %v", g, err)
		}
	}
	if err := refusal(f, "fns"); err != nil {
		t.Fatal(err)
	}
}
