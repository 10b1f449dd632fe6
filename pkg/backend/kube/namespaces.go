package kube

// Function namespaces, as OpenFaaS maps them on Kubernetes: the default
// function namespace, openfaas-fn, is the backend's own Kubernetes
// namespace; any other function namespace NS is the Kubernetes namespace
// NS, which must carry the label or the annotation openfaas: "1" (how
// OpenFaaS tells its function namespaces from the rest). A function in
// such a namespace is run by a backend of that namespace (its own
// EndpointSlice watch, workers and objects), made the first time one is
// deployed there; its events come back named NAME.NAMESPACE, the
// dispatcher's key.

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

// LabelOpenFaaS marks a Kubernetes namespace as a function namespace, as
// a label or an annotation, with the value "1".
const LabelOpenFaaS = "openfaas"

// maxNamespaces bounds the namespaces a backend runs functions in.
const maxNamespaces = 100

// isFunctionNamespace reports whether a Kubernetes namespace is marked as
// OpenFaaS marks its function namespaces.
func isFunctionNamespace(n *corev1.Namespace) bool {
	return n.Labels[LabelOpenFaaS] == "1" || n.Annotations[LabelOpenFaaS] == "1"
}

// kubeNamespace is the Kubernetes namespace of a function namespace: the
// backend's own for the default one, else the marked namespace of that
// name; another is refused with the reason (stack.ErrInvalid).
func (b *Backend) kubeNamespace(ns string) (string, error) {
	if ns == "" || ns == stack.DefaultNamespace {
		return b.ns, nil
	}
	if b.parent != nil {
		return "", fmt.Errorf("%w: namespace %q: a namespace's backend runs that namespace only", stack.ErrInvalid, ns)
	}
	if ns == b.ns {
		return "", fmt.Errorf("%w: namespace %q: it is the Kubernetes namespace of the default function namespace %q; name functions there %s",
			stack.ErrInvalid, ns, stack.DefaultNamespace, stack.DefaultNamespace)
	}
	ctx, cancel := context.WithTimeout(b.ctx, apiTimeout)
	defer cancel()
	n, err := b.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("%w: namespace %q: no Kubernetes namespace of that name; create it (faas-cli namespace create %s) or label an existing one %s=1",
			stack.ErrInvalid, ns, ns, LabelOpenFaaS)
	case err != nil:
		return "", fmt.Errorf("namespace %q: %w", ns, err)
	case !isFunctionNamespace(n):
		return "", fmt.Errorf("%w: namespace %q: the Kubernetes namespace is not a function namespace; OpenFaaS serves those labelled or annotated %s=1 (kubectl label namespace %s %s=1)",
			stack.ErrInvalid, ns, LabelOpenFaaS, ns, LabelOpenFaaS)
	}
	return ns, nil
}

// FunctionNamespaces lists the Kubernetes namespaces marked as function
// namespaces (not the default one, which is always there).
func (b *Backend) FunctionNamespaces(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := b.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	var out []string
	for i := range list.Items {
		n := &list.Items[i]
		if isFunctionNamespace(n) && n.Name != b.ns && n.DeletionTimestamp == nil {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// CreateNamespace creates a Kubernetes namespace marked as a function
// namespace, with the given labels and annotations, as faas-cli namespace
// create does on OpenFaaS; existed says one of that name was there, and
// nothing was done.
func (b *Backend) CreateNamespace(ctx context.Context, name string, labels, annotations map[string]string) (existed bool, err error) {
	if name == b.ns {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err = b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: namespaceLabels(labels), Annotations: annotations}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return true, nil
	}
	return false, err
}

// namespaceLabels are the user's labels under the marks, which win.
func namespaceLabels(labels map[string]string) map[string]string {
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	l[LabelOpenFaaS], l[LabelManagedBy] = "1", ManagedBy
	return l
}

// UpdateNamespace replaces the labels and annotations of a function
// namespace Gantry created.
func (b *Backend) UpdateNamespace(ctx context.Context, name string, labels, annotations map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	n, err := b.managedNamespace(ctx, name)
	if err != nil || n == nil {
		return err
	}
	n.Labels, n.Annotations = namespaceLabels(labels), annotations
	_, err = b.kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
	return err
}

// managedNamespace gets a namespace Gantry created: nil if there is none,
// an error with the reason if it is not Gantry's.
func (b *Backend) managedNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	n, err := b.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !isManaged(n) || name == b.ns:
		return nil, fmt.Errorf("%w: Kubernetes namespace %q was not created by Gantry, which leaves it alone (change it with kubectl; without its %s label or annotation it is no function namespace)",
			stack.ErrInvalid, name, LabelOpenFaaS)
	}
	return n, nil
}

// DeleteNamespace deletes a Kubernetes namespace Gantry created; one it
// did not is left alone, with the reason.
func (b *Backend) DeleteNamespace(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	n, err := b.managedNamespace(ctx, name)
	if err != nil || n == nil {
		return err
	}
	err = b.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// route finds the backend of a function reference's namespace: b itself
// for the default namespace (sub nil), else that namespace's, made if
// create and missing. name is the function's name there.
func (b *Backend) route(ctx context.Context, ref string, create bool) (sub *Backend, name string, err error) {
	name, ns := stack.SplitRef(ref)
	if ns == stack.DefaultNamespace || b.parent != nil {
		return nil, ref, nil
	}
	b.mu.Lock()
	sub, ok := b.subs[ns]
	closed, follow := b.closed, b.follow
	b.mu.Unlock()
	switch {
	case ok:
		return sub, name, nil
	case closed:
		return nil, name, ErrClosed
	case !create:
		return nil, name, fmt.Errorf("%w: %q", backend.ErrNotDeployed, ref)
	case b.cfg == nil:
		return nil, name, fmt.Errorf("%w: namespace %q: this backend has no cluster configuration to run another namespace with", stack.ErrInvalid, ns)
	}
	kns, err := b.kubeNamespace(ns)
	if err != nil {
		return nil, name, err
	}
	opts := b.opts
	opts.Follow = follow
	sub, err = New(b.cfg, kns, opts)
	if err != nil {
		return nil, name, fmt.Errorf("namespace %q: %w", ns, err)
	}
	sub.parent = b
	b.mu.Lock()
	defer b.mu.Unlock()
	if other, ok := b.subs[ns]; ok || b.closed || len(b.subs) >= maxNamespaces {
		// Another deploy made it meanwhile, or this one is too many.
		go func() { _ = sub.Close(context.Background()) }()
		switch {
		case ok:
			return other, name, nil
		case b.closed:
			return nil, name, ErrClosed
		}
		return nil, name, fmt.Errorf("%w: functions in %d namespaces already, the most this backend runs", stack.ErrInvalid, maxNamespaces)
	}
	sub.Attach(nsEvents{parent: b, ns: ns})
	b.subs[ns] = sub
	return sub, name, nil
}

// nsEvents hands a namespace backend's events to the parent's, with the
// function named NAME.NAMESPACE.
type nsEvents struct {
	parent *Backend
	ns     string
}

func (e nsEvents) ref(name string) string { return stack.Ref(name, e.ns) }

func (e nsEvents) Ready(inst backend.Instance) {
	inst.Function = e.ref(inst.Function)
	e.parent.out.push(event{kind: evReady, inst: inst, function: inst.Function})
}

func (e nsEvents) Failed(function string, err error) {
	e.parent.out.push(event{kind: evFailed, function: e.ref(function), err: err})
}

func (e nsEvents) Exited(inst backend.Instance, err error) {
	inst.Function = e.ref(inst.Function)
	e.parent.out.push(event{kind: evExited, inst: inst, function: inst.Function, err: err})
}

// subsOf is the namespace backends, in namespace order.
func (b *Backend) subsOf() []*Backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*Backend, 0, len(b.subs))
	for _, ns := range sortedKeys(b.subs) {
		out = append(out, b.subs[ns])
	}
	return out
}
