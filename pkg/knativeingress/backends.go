package knativeingress

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// Errors resolving a backend; the router answers them 503.
var (
	errNoService   = errors.New("no such service")
	errNoPort      = errors.New("the service has no such port")
	errNoEndpoints = errors.New("no ready endpoints")
)

// target is where a request goes: an endpoint's address and port, and
// whether the port speaks HTTP/2 without TLS (h2c).
type target struct {
	addr string
	h2c  bool
}

// resolver turns a Backend into a ready endpoint from the informers'
// caches of Services and EndpointSlices. There is no kube-proxy here, so
// the ClusterIP is never used: requests go to the endpoints' addresses.
type resolver struct {
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	next     sync.Map // Backend key -> *atomic.Uint64, round-robin counters
}

// external says whether the backend is an ExternalName Service. Knative
// points those at the ingress's own private load balancer (DomainMapping,
// rewriteHost), so the router routes such requests again itself.
func (r *resolver) external(b Backend) (bool, error) {
	svc, err := r.services.Services(b.ServiceNamespace).Get(b.ServiceName)
	if err != nil {
		return false, fmt.Errorf("%s/%s: %w", b.ServiceNamespace, b.ServiceName, errNoService)
	}
	return svc.Spec.Type == corev1.ServiceTypeExternalName, nil
}

// resolve picks the backend's next ready endpoint, round robin.
func (r *resolver) resolve(b Backend) (target, error) {
	svc, err := r.services.Services(b.ServiceNamespace).Get(b.ServiceName)
	if err != nil {
		return target{}, fmt.Errorf("%s/%s: %w", b.ServiceNamespace, b.ServiceName, errNoService)
	}
	sp, ok := servicePort(svc, b)
	if !ok {
		return target{}, fmt.Errorf("%s/%s port %s: %w", b.ServiceNamespace, b.ServiceName, b.ServicePort.String(), errNoPort)
	}
	addrs, err := r.ready(b, sp.Name)
	if err != nil {
		return target{}, err
	}
	c, _ := r.next.LoadOrStore(b.ServiceNamespace+"/"+b.ServiceName+":"+sp.Name, new(atomic.Uint64))
	i := c.(*atomic.Uint64).Add(1)
	return target{addr: addrs[i%uint64(len(addrs))], h2c: isH2C(sp)}, nil
}

// servicePort finds the Service's port the backend names, by number or
// by name.
func servicePort(svc *corev1.Service, b Backend) (corev1.ServicePort, bool) {
	for _, sp := range svc.Spec.Ports {
		if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
			continue
		}
		if (b.ServicePort.StrVal != "" && sp.Name == b.ServicePort.StrVal) ||
			(b.ServicePort.StrVal == "" && sp.Port == b.ServicePort.IntVal) {
			return sp, true
		}
	}
	return corev1.ServicePort{}, false
}

// isH2C says whether a Service port speaks HTTP/2 in clear text: by its
// appProtocol, or by Knative's port names.
func isH2C(sp corev1.ServicePort) bool {
	if sp.AppProtocol != nil {
		return *sp.AppProtocol == "kubernetes.io/h2c"
	}
	return sp.Name == "http2" || sp.Name == "h2c"
}

// ready lists the ready endpoints of the Service's port name, as
// host:port, from the EndpointSlices labelled with the Service's name.
func (r *resolver) ready(b Backend, portName string) ([]string, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: b.ServiceName})
	slices, err := r.slices.EndpointSlices(b.ServiceNamespace).List(sel)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slices {
		port, ok := slicePort(s, portName)
		if !ok || (s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6) {
			continue
		}
		for _, ep := range s.Endpoints {
			// A nil ready condition means ready (the API's convention).
			if len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			out = append(out, net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s/%s: %w", b.ServiceNamespace, b.ServiceName, errNoEndpoints)
	}
	return out, nil
}

// slicePort is the number of the slice's port named as the Service's.
func slicePort(s *discoveryv1.EndpointSlice, name string) (int32, bool) {
	for _, p := range s.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		if pn == name && p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
			return *p.Port, true
		}
	}
	return 0, false
}
