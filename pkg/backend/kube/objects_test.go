package kube

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

func testFunction() stack.Function {
	f := stack.Function{Name: "resize", Image: "registry.example/resize:1", Command: "gantry fn resize",
		Criticality: 70, MinScale: 1, Env: map[string]string{"B": "2", "A": "1", "PORT": "9999"},
		Labels: map[string]string{"team": "media", LabelFunction: "spoofed"}}
	f.Defaults()
	return f
}

func envNames(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

func TestPodTemplateRunsTheDeclaration(t *testing.T) {
	tpl := podTemplate(testFunction(), 8080)
	c := tpl.Spec.Containers[0]
	if c.Image != "registry.example/resize:1" || !slices.Equal(c.Command, []string{"gantry", "fn", "resize"}) {
		t.Errorf("container image %q command %q", c.Image, c.Command)
	}
	// Sorted, so the template (and so the rollout hash) is stable; the
	// user's PORT gives way to the one the probe and endpoints use.
	want := []string{"A=1", "B=2", "PORT=8080", "GANTRY_FUNCTION_NAME=resize", "POD_IP="}
	if got := envNames(c.Env); !slices.Equal(got, want) {
		t.Errorf("env %v, want %v", got, want)
	}
	if ref := c.Env[len(c.Env)-1].ValueFrom; ref == nil || ref.FieldRef == nil || ref.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP comes from %+v, want the downward API's status.podIP", ref)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8080 || c.Ports[0].Name != PortName {
		t.Errorf("ports %+v, want http 8080", c.Ports)
	}
	p := c.ReadinessProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != backend.HealthPath || p.HTTPGet.Port.IntValue() != 8080 {
		t.Fatalf("readiness probe %+v, want GET %s on 8080", p, backend.HealthPath)
	}
	l := tpl.Labels
	if l[LabelFunction] != "resize" || l[LabelManagedBy] != ManagedBy || l["team"] != "media" {
		t.Errorf("template labels %v: want Gantry's (winning over the user's) and the user's", l)
	}
	if tpl.Annotations[stack.AnnotationCriticality] != "70" {
		t.Errorf("template annotations %v, want the criticality", tpl.Annotations)
	}
}

func TestPodTemplateWithoutCommandKeepsTheImageEntrypoint(t *testing.T) {
	f := testFunction()
	f.Command = ""
	if c := podTemplate(f, 8080).Spec.Containers[0]; c.Command != nil {
		t.Errorf("command %q, want none", c.Command)
	}
}

func TestRTResourceCarriesCriticalityAndSelectsItsTemplate(t *testing.T) {
	rt := newRTResource(testFunction(), "ns", 8080, 1)
	if rt.Spec.Criticality == nil || *rt.Spec.Criticality != 70 {
		t.Errorf("criticality %v, want 70", rt.Spec.Criticality)
	}
	if *rt.Spec.Replicas != 1 || rt.Namespace != "ns" || rt.Name != "resize" {
		t.Errorf("object %s/%s replicas %d", rt.Namespace, rt.Name, *rt.Spec.Replicas)
	}
	assertSelects(t, rt.Spec.Selector.AsMetav1(), rt.Spec.Template.Labels)
	if !isManaged(rt) {
		t.Error("the RTResource is not marked managed by Gantry")
	}
}

func TestDeploymentSelectsItsTemplate(t *testing.T) {
	d := newDeployment(testFunction(), "ns", 8080, 0)
	assertSelects(t, d.Spec.Selector, d.Spec.Template.Labels)
	if *d.Spec.Replicas != 0 || d.Annotations[stack.AnnotationCriticality] != "70" {
		t.Errorf("replicas %d annotations %v", *d.Spec.Replicas, d.Annotations)
	}
}

func TestServiceIsHeadlessAndSelectsThePods(t *testing.T) {
	f := testFunction()
	svc := newService(f, "ns", 8080)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("clusterIP %q, want headless", svc.Spec.ClusterIP)
	}
	assertSelects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, podTemplate(f, 8080).Labels)
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Name != PortName || p[0].TargetPort.IntValue() != 8080 {
		t.Errorf("ports %+v", p)
	}
}

func assertSelects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	if s.Empty() || !s.Matches(labels.Set(podLabels)) {
		t.Errorf("selector %v does not select pod labels %v", s, podLabels)
	}
}

// Options.NodeSelector reaches the pod template of either kind.
func TestNodeSelectorReachesThePodTemplate(t *testing.T) {
	kc := fake.NewClientset()
	sel := map[string]string{"type": "process"}
	w := &deploymentWorkload{kube: kc, ns: "ns", nodeSelector: sel}
	if err := w.apply(context.Background(), testFunction(), 8080, 1); err != nil {
		t.Fatal(err)
	}
	d, err := kc.AppsV1().Deployments("ns").Get(context.Background(), "resize", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.NodeSelector; !maps.Equal(got, sel) {
		t.Errorf("nodeSelector %v, want %v", got, sel)
	}
}

func TestContainerCommandUsesAShellOnlyWhenTheLineNeedsOne(t *testing.T) {
	for line, want := range map[string][]string{
		"/gantry fn sentiment":                {"/gantry", "fn", "sentiment"},
		"  python3   handler.py ":             {"python3", "handler.py"},
		"gantry fn echo --addr $POD_IP:$PORT": {"/bin/sh", "-c", "gantry fn echo --addr $POD_IP:$PORT"},
		"node index.js | tee /tmp/log":        {"/bin/sh", "-c", "node index.js | tee /tmp/log"},
		`sh -c 'exec app'`:                    {"/bin/sh", "-c", `sh -c 'exec app'`},
		"app > out.txt":                       {"/bin/sh", "-c", "app > out.txt"},
		"run *.py":                            {"/bin/sh", "-c", "run *.py"},
	} {
		if got := containerCommand(line); !slices.Equal(got, want) {
			t.Errorf("containerCommand(%q) = %q, want %q", line, got, want)
		}
	}
}
