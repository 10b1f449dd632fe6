package crd

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The embedded manifest is the RTResource CRD with its scale subresource,
// the object the controller and the backends expect.
func TestEmbeddedManifestIsTheRTResourceCRD(t *testing.T) {
	var obj struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(RTResource, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Kind != "CustomResourceDefinition" || obj.Metadata.Name != "rtresources.gantry.dev" {
		t.Errorf("got %s %s", obj.Kind, obj.Metadata.Name)
	}
	if !strings.Contains(string(RTResource), "specReplicasPath") {
		t.Error("no scale subresource")
	}
}

// A manifest that does not parse is an error before any API call (a nil
// client would panic if one were made).
func TestInstallRefusesAMalformedManifest(t *testing.T) {
	err := Install(t.Context(), nil, []byte("kind: [unclosed"))
	if err == nil || !strings.Contains(err.Error(), "parse the CRD") {
		t.Fatalf("got %v", err)
	}
}
