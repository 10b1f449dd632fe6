package knativert

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/rtcontroller"
)

// TestKnativeExamplesAreServicesTheDocsRun checks examples/knative, which
// the README's "Run with Knative" applies with kubectl: every file is one
// Knative Service whose one container is dev.local/gantry-fn:NAME of an
// example function (what a process node can run), and
// summarize-critical.yaml is summarize.yaml with a valid criticality on its
// Revision template, so Gantry backs it with an RTResource and the other
// is left to Knative.
func TestKnativeExamplesAreServicesTheDocsRun(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "examples", "knative")
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples in %s: %v", dir, err)
	}
	svcs := map[string]*unstructured.Unstructured{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.UnmarshalStrict(data, &obj.Object); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if obj.GetAPIVersion() != "serving.knative.dev/v1" || obj.GetKind() != "Service" {
			t.Errorf("%s: %s %s, want a serving.knative.dev/v1 Service", p, obj.GetAPIVersion(), obj.GetKind())
		}
		if want := strings.TrimSuffix(filepath.Base(p), ".yaml"); obj.GetName() != want {
			t.Errorf("%s: named %q, want %q (the docs use the file's name)", p, obj.GetName(), want)
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if len(containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", p, len(containers))
		}
		image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
		fn, ok := strings.CutPrefix(image, "dev.local/gantry-fn:")
		if !ok || !slices.Contains(functions.Names(), fn) {
			t.Errorf("%s: image %q, want dev.local/gantry-fn:NAME of one of %v", p, image, functions.Names())
		}
		svcs[obj.GetName()] = obj
	}

	plain, crit := svcs["summarize"], svcs["summarize-critical"]
	if plain == nil || crit == nil {
		t.Fatalf("want summarize.yaml and summarize-critical.yaml, have %v", slices.Sorted(maps.Keys(svcs)))
	}
	ann := func(o *unstructured.Unstructured) map[string]string {
		m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "annotations")
		return m
	}
	if Critical(ann(plain)) {
		t.Errorf("summarize.yaml carries %s; it is the Deployment-backed example", gantryv1.CriticalityAnnotation)
	}
	if !Critical(ann(crit)) {
		t.Fatalf("summarize-critical.yaml lacks %s on spec.template.metadata.annotations", gantryv1.CriticalityAnnotation)
	}
	// The RTResource carries the Revision's annotation; the controller must
	// read it as a criticality, not as an InvalidSpec Event.
	rt := &gantryv1.RTResource{ObjectMeta: metav1.ObjectMeta{Annotations: ann(crit)}}
	if c, err := rtcontroller.Criticality(rt); err != nil || c <= gantryv1.MinCriticality {
		t.Errorf("summarize-critical.yaml's criticality: %d, %v; want a valid value above %d", c, err, gantryv1.MinCriticality)
	}
	plainSpec, _, _ := unstructured.NestedMap(plain.Object, "spec", "template", "spec")
	critSpec, _, _ := unstructured.NestedMap(crit.Object, "spec", "template", "spec")
	if !reflect.DeepEqual(plainSpec, critSpec) {
		t.Errorf("summarize-critical.yaml's pod spec %v differs from summarize.yaml's %v", critSpec, plainSpec)
	}
}
