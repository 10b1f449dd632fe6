package knativeinstall

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// hack/knative/go.mod pins the version the build script builds; the
// constant must name the same one, or RequireBuild looks in the wrong folder.
func TestVersionMatchesHackModule(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "..", "hack", "knative", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?knative\.dev/serving\s+(v\S+)`).FindSubmatch(gomod)
	if m == nil || string(m[1]) != ServingVersion {
		t.Errorf("hack/knative/go.mod requires knative.dev/serving %s; knativeinstall expects %s", m, ServingVersion)
	}
}

func TestBuildScriptUsesTheSameVersionKey(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "build-knative.sh"))
	if err != nil {
		t.Fatal(err)
	}
	const keyLine = `key="serving-${serving_version}"`
	if !strings.Contains(string(script), keyLine) {
		t.Errorf("hack/build-knative.sh no longer computes %s; VersionKey() is %s", keyLine, VersionKey())
	}
}

func TestRequireBuildNamesEachMissingFileAndTheMakeTarget(t *testing.T) {
	t.Setenv("GANTRY_CACHE", t.TempDir())
	// A half-built cache: one binary present, the rest and the config not.
	if err := os.MkdirAll(BinDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(BinDir(), "controller"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := RequireBuild()
	if !errors.Is(err, ErrMissingBuild) {
		t.Fatalf("RequireBuild() = %v, want ErrMissingBuild", err)
	}
	for _, want := range []string{"make knative", "bin/webhook", "bin/autoscaler", "bin/activator", "bin/queue", "config/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "bin/controller") {
		t.Errorf("error names bin/controller, which is there:\n%v", err)
	}
}

func TestImagesMapEveryKnativeImageToItsBinary(t *testing.T) {
	m := Images("/cache/bin")
	for _, b := range []string{"controller", "webhook", "autoscaler", "activator", "queue"} {
		argv := m["ko://knative.dev/serving/cmd/"+b]
		if len(argv) != 1 || argv[0] != "/cache/bin/"+b {
			t.Errorf("image of %s maps to %q, want [/cache/bin/%s]", b, argv, b)
		}
	}
	if len(m) != 5 {
		t.Errorf("%d images, want 5: %v", len(m), m)
	}
}

// writeManifests writes a config/core-like folder: files in subfolders,
// several documents a file, comment-only documents, a Go file to skip.
func writeManifests(t *testing.T, skip string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"100-namespace.yaml": "# comment only\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: knative-serving\n",
		"placeholder.go":     "package placeholder\n",
		"configmaps/network.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-network\n  namespace: knative-serving\n" +
			"data:\n  _example: |\n    ingress-class: kourier\n",
		"configmaps/domain.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-domain\n  namespace: knative-serving\n",
	}
	for _, c := range Components {
		files["deployments/"+c+".yaml"] = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + c + "\n  namespace: knative-serving\n" +
			"spec:\n  template:\n    spec:\n      containers:\n      - name: " + c + "\n        image: ko://knative.dev/serving/cmd/" + c + "\n" +
			"---\napiVersion: v1\nkind: Service\nmetadata:\n  name: " + c + "\n  namespace: knative-serving\n"
	}
	for name, data := range files {
		if name == skip {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

func TestLoadRendersTheIngressClassDomainAndNodeSelector(t *testing.T) {
	objs, err := Load(writeManifests(t, ""), Settings{Domain: "example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3+2*len(Components) {
		t.Fatalf("%d objects, want %d (empty documents and .go files skipped)", len(objs), 3+2*len(Components))
	}
	net, _, _ := unstructured.NestedStringMap(find(objs, "ConfigMap", "config-network").Object, "data")
	if net["ingress-class"] != IngressClass || net["mesh-compatibility-mode"] != "disabled" || net["_example"] == "" {
		t.Errorf("config-network data = %v, want the ingress class, mesh compatibility off and _example kept", net)
	}
	dom, _, _ := unstructured.NestedStringMap(find(objs, "ConfigMap", "config-domain").Object, "data")
	if v, ok := dom["example.test"]; !ok || v != "" || len(dom) != 1 {
		t.Errorf("config-domain data = %v, want {example.test: \"\"}", dom)
	}
	for _, c := range Components {
		sel, _, _ := unstructured.NestedStringMap(find(objs, "Deployment", c).Object, "spec", "template", "spec", "nodeSelector")
		if sel["type"] != "process" || len(sel) != 1 {
			t.Errorf("Deployment %s nodeSelector = %v, want type=process", c, sel)
		}
	}
	if objs[0].GetKind() != "Namespace" {
		t.Errorf("first object is %s, want the Namespace (files in path order)", objs[0].GetKind())
	}
}

func TestLoadDefaultsTheDomain(t *testing.T) {
	objs, err := Load(writeManifests(t, ""), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	dom, _, _ := unstructured.NestedStringMap(find(objs, "ConfigMap", "config-domain").Object, "data")
	if _, ok := dom[DefaultDomain]; !ok {
		t.Errorf("config-domain data = %v, want %s", dom, DefaultDomain)
	}
}

func TestLoadFailsWhenAnObjectItRendersIsMissing(t *testing.T) {
	for _, skip := range []string{"configmaps/domain.yaml", "configmaps/network.yaml", "deployments/webhook.yaml"} {
		_, err := Load(writeManifests(t, skip), Settings{})
		want := map[string]string{
			"configmaps/domain.yaml":   "ConfigMap/config-domain",
			"configmaps/network.yaml":  "ConfigMap/config-network",
			"deployments/webhook.yaml": "Deployment/webhook",
		}[skip]
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without %s: Load error = %v, want one naming %s", skip, err, want)
		}
	}
}

func TestLoadRefusesDocumentsWithoutKindOrName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, Settings{}); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("Load = %v, want an error naming bad.yaml", err)
	}
	if _, err := Load(t.TempDir(), Settings{}); err == nil || !strings.Contains(err.Error(), "no YAML file") {
		t.Errorf("Load of an empty folder = %v, want 'no YAML file'", err)
	}
}
