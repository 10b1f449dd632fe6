package knativeinstall

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// IngressClass is the KIngress class Gantry's ingress serves
// (`gantry serve --knative-ingress`).
const IngressClass = "gantry.ingress.networking.knative.dev"

// DefaultDomain is the cluster's domain unless Settings.Domain says
// otherwise: .test is reserved (RFC 2606), so no name under it leaves the
// machine by accident.
const DefaultDomain = "knative.gantry.test"

// ProcessNodeSelector pins Knative's components to the process nodes
// (processnode labels its nodes type=process, kwok's are type=kwok).
var ProcessNodeSelector = map[string]any{"type": "process"}

// Settings are what the rendering sets in Knative's configuration.
type Settings struct {
	Domain string // the cluster's domain (default DefaultDomain)
}

// Bounds on what Load reads, so a wrong folder fails instead of filling memory.
const (
	maxManifestFiles = 200
	maxManifestBytes = 4 << 20
	maxObjects       = 1000
)

// Load reads every YAML manifest under dir (the assembled config/core) in
// path order and renders it for this platform (see the package doc).
func Load(dir string, s Settings) ([]*unstructured.Unstructured, error) {
	if s.Domain == "" {
		s.Domain = DefaultDomain
	}
	files, err := manifestFiles(dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		got, err := readObjects(f)
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
		if len(objs) > maxObjects {
			return nil, fmt.Errorf("knative manifests in %s: more than %d objects", dir, maxObjects)
		}
	}
	if err := render(objs, s); err != nil {
		return nil, fmt.Errorf("knative manifests in %s: %w", dir, err)
	}
	return objs, nil
}

func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		if len(files) > maxManifestFiles {
			return fmt.Errorf("more than %d manifest files", maxManifestFiles)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("knative manifests: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("knative manifests: no YAML file under %s", dir)
	}
	slices.Sort(files)
	return files, nil
}

// readObjects decodes the YAML documents of one file, skipping empty ones
// (comment-only documents are common in Knative's files).
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: a document without apiVersion, kind or name", path)
		}
		out = append(out, u)
	}
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxManifestBytes)
	}
	return data, nil
}

// render changes the configuration the package doc lists, and fails if an
// object it must change is missing, so a Knative bump that renames one is
// caught here rather than by a cluster that never gets ready.
func render(objs []*unstructured.Unstructured, s Settings) error {
	found := map[string]bool{}
	for _, u := range objs {
		if u.GetNamespace() != Namespace {
			continue
		}
		var err error
		switch {
		case u.GetKind() == "ConfigMap" && u.GetName() == "config-network":
			err = setData(u, map[string]string{
				"ingress-class":           IngressClass,
				"mesh-compatibility-mode": "disabled",
			})
		case u.GetKind() == "ConfigMap" && u.GetName() == "config-domain":
			err = setData(u, map[string]string{s.Domain: ""})
		case u.GetKind() == "Deployment":
			err = unstructured.SetNestedMap(u.Object, ProcessNodeSelector, "spec", "template", "spec", "nodeSelector")
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		found[u.GetKind()+"/"+u.GetName()] = true
	}
	want := []string{"ConfigMap/config-network", "ConfigMap/config-domain"}
	for _, c := range Components {
		want = append(want, "Deployment/"+c)
	}
	for _, w := range want {
		if !found[w] {
			return fmt.Errorf("no %s in namespace %s", w, Namespace)
		}
	}
	return nil
}

func setData(u *unstructured.Unstructured, kv map[string]string) error {
	data, _, err := unstructured.NestedStringMap(u.Object, "data")
	if err != nil {
		return err
	}
	if data == nil {
		data = map[string]string{}
	}
	for k, v := range kv {
		data[k] = v
	}
	return unstructured.SetNestedStringMap(u.Object, data, "data")
}
