package kube

import (
	"fmt"

	"gantry.dev/gantry/pkg/stack"
)

// kubeNamespace is the Kubernetes namespace of a function namespace: the
// backend's own for the default one.
func (b *Backend) kubeNamespace(ns string) (string, error) {
	if ns == "" || ns == stack.DefaultNamespace {
		return b.ns, nil
	}
	return "", fmt.Errorf("%w: namespace %q: the kubernetes backend runs every function in its one Kubernetes namespace %q, which is function namespace %q",
		stack.ErrInvalid, ns, b.ns, stack.DefaultNamespace)
}
