// Package v1alpha1 holds the RTResource API: a Deployment-like workload with a
// criticality that Gantry's priority-preemptive controller reconciles.
//
// +kubebuilder:object:generate=true
// +groupName=gantry.dev
package v1alpha1

// `make generate` runs this; generate_test.go fails when its output is stale.
//go:generate go tool controller-gen object crd:generateEmbeddedObjectMeta=true paths=. output:object:dir=. output:crd:dir=../../config/crd/bases

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every Gantry resource.
const GroupName = "gantry.dev"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource is the plural REST resource name of RTResource.
const Resource = "rtresources"

var (
	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types in this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &RTResource{}, &RTResourceList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
