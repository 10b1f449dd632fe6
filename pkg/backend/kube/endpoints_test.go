package kube

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// ep is an endpoint for pod at ip; ready and terminating may be nil.
func ep(pod, ip string, ready, terminating *bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
	if pod != "" {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod}
	}
	return e
}

func slice(name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelServiceName: "fn"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: eps}
}

func TestViewKeepsOnlyRoutablePodEndpoints(t *testing.T) {
	s := slice("fn-1", nil,
		ep("ready", "10.0.0.1", ptr.To(true), nil),
		ep("unknown", "10.0.0.2", nil, nil), // nil Ready means ready
		ep("not-ready", "10.0.0.3", ptr.To(false), nil),
		ep("terminating", "10.0.0.4", ptr.To(true), ptr.To(true)),
		ep("", "10.0.0.5", ptr.To(true), nil), // no pod: not an instance
	)
	got := viewOf([]*discoveryv1.EndpointSlice{s}, 8080)
	want := map[string]string{"ready": "10.0.0.1:8080", "unknown": "10.0.0.2:8080"}
	if !maps.Equal(got, want) {
		t.Errorf("view %v, want %v", got, want)
	}
}

func TestViewUsesTheHTTPPortAndFirstSliceByName(t *testing.T) {
	ports := []discoveryv1.EndpointPort{
		{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)},
		{Name: ptr.To(PortName), Port: ptr.To[int32](8081)},
	}
	v6 := slice("fn-b", nil, ep("a", "fd00::1", nil, nil))
	v6.AddressType = discoveryv1.AddressTypeIPv6
	got := viewOf([]*discoveryv1.EndpointSlice{slice("fn-a", ports, ep("a", "10.0.0.1", nil, nil)), v6,
		slice("fn-c", []discoveryv1.EndpointPort{{Port: ptr.To[int32](7000)}}, ep("b", "fd00::2", nil, nil))}, 8080)
	want := map[string]string{"a": "10.0.0.1:8081", "b": "[fd00::2]:7000"}
	if !maps.Equal(got, want) {
		t.Errorf("view %v, want %v", got, want)
	}
}

func TestServiceOfReadsTombstones(t *testing.T) {
	s := slice("fn-1", nil)
	if got := serviceOf(s); got != "fn" {
		t.Errorf("service %q", got)
	}
	if got := serviceOf(cache.DeletedFinalStateUnknown{Key: "ns/fn-1", Obj: s}); got != "fn" {
		t.Errorf("service of a tombstone %q", got)
	}
}
