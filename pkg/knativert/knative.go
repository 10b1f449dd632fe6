package knativert

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// The Knative resources Gantry reads, as Knative Serving v0.50.0 serves them.
var (
	RevisionGVR      = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "revisions"}
	PodAutoscalerGVR = schema.GroupVersionResource{Group: "autoscaling.internal.knative.dev", Version: "v1alpha1", Resource: "podautoscalers"}
	RTResourceGVR    = gantryv1.SchemeGroupVersion.WithResource(gantryv1.Resource)
)

const (
	revisionGroup = "serving.knative.dev"
	revisionKind  = "Revision"
	rtKind        = "RTResource"

	// RevisionLabel names the Revision on everything Knative makes for
	// it; the KPA counts a revision's pods by it.
	RevisionLabel = "serving.knative.dev/revision"
	// RevisionUIDLabel is the Deployment's selector, so the RTResource's.
	RevisionUIDLabel = "serving.knative.dev/revisionUID"

	// InitialReplicasAnnotation keeps, on a critical Revision's
	// Deployment, the replicas Knative created it with (its initial
	// scale) after the webhook set them to 0: the RTResource starts there,
	// as the Deployment would have. Knative keeps annotations outside its
	// own keys when it updates the Deployment.
	InitialReplicasAnnotation = "gantry.dev/knative-initial-replicas"
)

// Critical reports whether a Revision with these annotations is backed by
// an RTResource: the criticality annotation is present. A malformed value
// still counts; the RTResource controller reports it as an InvalidSpec
// Event and uses criticality 0 (docs/controller.md, "Criticality").
func Critical(annotations map[string]string) bool {
	_, ok := annotations[gantryv1.CriticalityAnnotation]
	return ok
}

// RTName is the name of the RTResource behind a Revision: the Revision's.
func RTName(revision string) string { return revision }

// ScaleTargetRef is what a critical Revision's PodAutoscaler points at.
func ScaleTargetRef(revision string) map[string]any {
	return map[string]any{
		"apiVersion": gantryv1.SchemeGroupVersion.String(),
		"kind":       rtKind,
		"name":       RTName(revision),
	}
}

// revisionOwner returns the name of the Revision that controls an object
// Knative made for it, or "" if none does.
func revisionOwner(refs []metav1.OwnerReference) (name string, uid string) {
	for _, r := range refs {
		if r.Controller == nil || !*r.Controller || r.Kind != revisionKind {
			continue
		}
		if gv, err := schema.ParseGroupVersion(r.APIVersion); err == nil && gv.Group == revisionGroup {
			return r.Name, string(r.UID)
		}
	}
	return "", ""
}

// key is a workqueue key.
func key(ns, name string) string { return ns + "/" + name }

func splitKey(k string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(k, "/")
	if !ok || name == "" {
		return "", "", fmt.Errorf("bad key %q", k)
	}
	return ns, name, nil
}
