package crd

import (
	"fmt"
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

// What kubectl users meet: the short names (rt is Knative's Route's too,
// so rtr is needed beside Knative), `kubectl get all`, and the columns of
// `kubectl get rt` and, with -o wide, a Deployment's Up-to-date and
// Available.
func TestNamesAndColumnsForKubectl(t *testing.T) {
	var obj struct {
		Spec struct {
			Names struct {
				ShortNames []string `json:"shortNames"`
				Categories []string `json:"categories"`
			} `json:"names"`
			Versions []struct {
				Columns []struct {
					Name     string `json:"name"`
					Priority int    `json:"priority"`
				} `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(RTResource, &obj); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(obj.Spec.Names.ShortNames, ","); got != "rt,rtr" {
		t.Errorf("short names %s, want rt,rtr", got)
	}
	if got := strings.Join(obj.Spec.Names.Categories, ","); got != "all,gantry" {
		t.Errorf("categories %s, want all,gantry", got)
	}
	var cols []string
	for _, c := range obj.Spec.Versions[0].Columns {
		cols = append(cols, fmt.Sprintf("%s/%d", c.Name, c.Priority))
	}
	if got, want := strings.Join(cols, " "), "Criticality/0 Desired/0 Ready/0 Up-to-date/1 Available/1 Age/0"; got != want {
		t.Errorf("printer columns %s, want %s", got, want)
	}
}
