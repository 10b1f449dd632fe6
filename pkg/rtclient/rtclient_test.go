package rtclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// A Get goes to the RTResource path of the group and version and decodes
// the answer into an RTResource; the caller's config is left as it was.
func TestGetReadsAnRTResourceFromItsPath(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(gantryv1.RTResource{
			TypeMeta:   metav1.TypeMeta{APIVersion: gantryv1.SchemeGroupVersion.String(), Kind: "RTResource"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fn"},
			Spec:       gantryv1.RTResourceSpec{Replicas: ptr.To[int32](3)},
		})
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, scheme)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := c.Namespace("ns").Get(context.Background(), "fn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "/apis/gantry.dev/v1alpha1/namespaces/ns/rtresources/fn"; path != want {
		t.Errorf("GET %s, want %s", path, want)
	}
	if rt.Name != "fn" || rt.Spec.Replicas == nil || *rt.Spec.Replicas != 3 {
		t.Errorf("got %s with replicas %v, want fn with 3", rt.Name, rt.Spec.Replicas)
	}
	if cfg.GroupVersion != nil || cfg.APIPath != "" || cfg.UserAgent != "" {
		t.Errorf("New changed the caller's config: %+v", cfg)
	}
}
