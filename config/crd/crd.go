// Package crd carries the RTResource CustomResourceDefinition that
// controller-gen writes to bases/, so binaries and tests install the very
// file `make deploy` ships without knowing where the repository is.
package crd

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// RTResource is bases/gantry.dev_rtresources.yaml.
//
//go:embed bases/gantry.dev_rtresources.yaml
var RTResource []byte

var gvr = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Install creates the CRD in manifest (RTResource when nil) unless it
// exists, and waits until the apiserver reports it Established, so the
// caller's first create of the kind does not race its registration.
// Created with create, not apply: the CRD is larger than the 256 KiB that
// client-side apply's last-applied annotation may hold.
func Install(ctx context.Context, dyn dynamic.Interface, manifest []byte) error {
	if manifest == nil {
		manifest = RTResource
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(manifest, &obj.Object); err != nil {
		return fmt.Errorf("parse the CRD: %w", err)
	}
	crds := dyn.Resource(gvr)
	if _, err := crds.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil // not visible yet, or a transient error: poll again
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", obj.GetName(), err)
	}
	return nil
}
