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

// A function's secrets are a read-only projected volume of its Secrets at
// OpenFaaS's path, one file per secret, and the path in the variable the
// local runtime sets too.
func TestPodMountsTheFunctionsSecrets(t *testing.T) {
	f := testFunction()
	f.Secrets = []string{"db", "api-key"}
	spec := podTemplate(f, 8080).Spec
	if len(spec.Volumes) != 1 || spec.Volumes[0].Projected == nil || len(spec.Volumes[0].Projected.Sources) != 2 {
		t.Fatalf("volumes %+v", spec.Volumes)
	}
	for i, name := range f.Secrets {
		src := spec.Volumes[0].Projected.Sources[i].Secret
		if src == nil || src.Name != name || len(src.Items) != 1 || src.Items[0].Key != name || src.Items[0].Path != name {
			t.Fatalf("source %d: %+v", i, src)
		}
	}
	c := spec.Containers[0]
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != SecretsMountPath || !c.VolumeMounts[0].ReadOnly {
		t.Fatalf("mounts %+v", c.VolumeMounts)
	}
	var dir string
	for _, e := range c.Env {
		if e.Name == EnvSecretsDir {
			dir = e.Value
		}
	}
	if dir != SecretsMountPath {
		t.Fatalf("%s=%q", EnvSecretsDir, dir)
	}
	if v := podTemplate(testFunction(), 8080).Spec.Volumes; len(v) != 0 {
		t.Fatalf("volumes without secrets: %+v", v)
	}
}
