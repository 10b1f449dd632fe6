package e2e

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/backend/kube"
)

// mirror publishes one EndpointSlice for a function's Service from its
// pods, as the EndpointSlice controller would: an endpoint per pod with an
// IP, ready when the pod is Ready and not terminating, naming the pod in
// targetRef. It polls rather than watches: it only needs to be simple and
// right.
type mirror struct {
	e      *env
	fn     string
	frozen atomic.Bool // while set, the slice is left as it is
	last   []discoveryv1.Endpoint
}

func (e *env) startMirror(t *testing.T, fn string) *mirror {
	m := &mirror{e: e, fn: fn}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if !m.frozen.Load() {
				if err := m.publish(ctx); err != nil && ctx.Err() == nil {
					t.Logf("mirror %s: %v", fn, err)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

func (m *mirror) publish(ctx context.Context) error {
	pods, err := m.e.kube.CoreV1().Pods(m.e.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelFunction + "=" + m.fn})
	if err != nil {
		return err
	}
	eps := endpointsOf(pods.Items)
	if m.last != nil && reflect.DeepEqual(eps, m.last) {
		return nil
	}
	if err := m.write(ctx, eps); err != nil {
		return err
	}
	m.last = eps
	return nil
}

func endpointsOf(pods []corev1.Pod) []discoveryv1.Endpoint {
	eps := []discoveryv1.Endpoint{}
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		terminating := p.DeletionTimestamp != nil
		eps = append(eps, discoveryv1.Endpoint{
			Addresses: []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(podReady(&p) && !terminating), Serving: ptr.To(podReady(&p)), Terminating: ptr.To(terminating)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		})
	}
	slices.SortFunc(eps, func(a, b discoveryv1.Endpoint) int { return strings.Compare(a.TargetRef.Name, b.TargetRef.Name) })
	return eps
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// write creates or replaces the slice, labelled as the EndpointSlice
// controller labels its own.
func (m *mirror) write(ctx context.Context, eps []discoveryv1.Endpoint) error {
	slices := m.e.kube.DiscoveryV1().EndpointSlices(m.e.ns)
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: m.fn + "-mirror", Namespace: m.e.ns, Labels: map[string]string{
			kube.LabelServiceName:      m.fn,
			discoveryv1.LabelManagedBy: "e2e-mirror",
			kube.LabelFunction:         m.fn,
			kube.LabelManagedBy:        kube.ManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(kube.PortName), Port: ptr.To[int32](kube.DefaultPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
	cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	want.ResourceVersion = cur.ResourceVersion
	_, err = slices.Update(ctx, want, metav1.UpdateOptions{})
	return err
}
