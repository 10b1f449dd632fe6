package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/stack"
)

// refusal is the Kubernetes backend's answer to OpenFaaS's fields it
// cannot carry out, as an ErrInvalid (HTTP 400) with the reason.
//
// Namespaces: a backend watches the EndpointSlices of one Kubernetes
// namespace and writes its objects there; other function namespaces go to
// backends of their own (namespaces.go).
func refusal(f stack.Function, ns string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: function %q: %s", stack.ErrInvalid, f.Name, fmt.Sprintf(format, args...))
	}
	if f.Namespace != "" && f.Namespace != stack.DefaultNamespace {
		// Deploy hands such a function to its namespace's backend.
		return bad("namespace %q: a backend of Kubernetes namespace %q runs its function namespace only", f.Namespace, ns)
	}
	for _, c := range f.Constraints {
		if _, _, ok := nodeSelectorTerm(c); !ok {
			return bad("constraint %q: want KEY=VALUE or KEY == VALUE, a node label the pod is placed by", c)
		}
	}
	return nil
}

// applyFields carries limits, requests, readOnlyRootFilesystem and the
// constraints into the pod: resources, the container's security context
// and a node selector, as faas-netes does.
func applyFields(f stack.Function, spec *corev1.PodSpec) {
	c := &spec.Containers[0]
	c.Resources.Limits = resourceList(f.Limits)
	c.Resources.Requests = resourceList(f.Requests)
	if f.ReadOnlyRootFilesystem {
		c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
	}
	for _, con := range f.Constraints {
		k, v, _ := nodeSelectorTerm(con)
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[k] = v
	}
}

func resourceList(r stack.Resources) corev1.ResourceList {
	if r.IsZero() {
		return nil
	}
	out := corev1.ResourceList{}
	// Validate parsed both already; a quantity that fails here was never
	// accepted.
	if q, err := resource.ParseQuantity(r.Memory); r.Memory != "" && err == nil {
		out[corev1.ResourceMemory] = q
	}
	if q, err := resource.ParseQuantity(r.CPU); r.CPU != "" && err == nil {
		out[corev1.ResourceCPU] = q
	}
	return out
}

// nodeSelectorTerm reads "KEY=VALUE" or Swarm's "KEY == VALUE".
func nodeSelectorTerm(c string) (key, value string, ok bool) {
	k, v, found := strings.Cut(c, "==")
	if !found {
		k, v, found = strings.Cut(c, "=")
	}
	key, value = strings.TrimSpace(k), strings.TrimSpace(v)
	return key, value, found && key != "" && value != "" && !strings.ContainsAny(key+value, "=! ")
}
