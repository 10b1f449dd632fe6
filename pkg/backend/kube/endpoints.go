package kube

import (
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// serviceIndex indexes EndpointSlices by the Service they belong to, so a
// function's slices are one lookup.
const serviceIndex = "service"

func indexByService(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	if svc := s.Labels[LabelServiceName]; svc != "" {
		return []string{svc}, nil
	}
	return nil, nil
}

// serviceOf names the Service of a slice from an informer notification,
// tombstones included.
func serviceOf(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		return s.Labels[LabelServiceName]
	}
	return ""
}

// routable reports whether an endpoint should receive requests: ready, and
// not terminating. A nil Ready means unknown, which the API says to treat
// as ready.
func routable(ep discoveryv1.Endpoint) bool {
	c := ep.Conditions
	return (c.Ready == nil || *c.Ready) && (c.Terminating == nil || !*c.Terminating)
}

// podOf is the pod an endpoint stands for; endpoints that name no pod
// cannot be stopped or told apart, so they are not instances.
func podOf(ep discoveryv1.Endpoint) string {
	if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
		return ""
	}
	return ep.TargetRef.Name
}

// slicePort is the port a slice routes to: the one named http, else the
// first with a number, else the backend's default.
func slicePort(s *discoveryv1.EndpointSlice, def int32) int32 {
	var first *int32
	for _, p := range s.Ports {
		if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
			continue
		}
		if p.Name != nil && *p.Name == PortName {
			return *p.Port
		}
		if first == nil {
			first = p.Port
		}
	}
	if first != nil {
		return *first
	}
	return def
}

// viewOf merges a Service's slices into pod to host:port for its routable
// endpoints. Slices are read in name order and the first address of a pod
// wins, so the result does not depend on map or cache order (a dual-stack
// pod appears in an IPv4 and an IPv6 slice).
func viewOf(all []*discoveryv1.EndpointSlice, defPort int32) map[string]string {
	view := map[string]string{}
	for _, s := range all {
		port := strconv.Itoa(int(slicePort(s, defPort)))
		for _, ep := range s.Endpoints {
			pod := podOf(ep)
			if pod == "" || len(ep.Addresses) == 0 || !routable(ep) {
				continue
			}
			if _, seen := view[pod]; !seen {
				view[pod] = net.JoinHostPort(ep.Addresses[0], port)
			}
		}
	}
	return view
}

// cachedSlices returns a Service's slices from the informer's index, in
// name order.
func cachedSlices(idx cache.Indexer, service string) []*discoveryv1.EndpointSlice {
	objs, err := idx.ByIndex(serviceIndex, service)
	if err != nil {
		return nil // only an unknown index name errors, and it is registered
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}
