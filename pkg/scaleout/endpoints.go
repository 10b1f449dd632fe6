package scaleout

import (
	"net"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Who the other replicas are: the serving endpoints of the Service.

// replicas maps every other replica (its pod) to its gateway's address:
// the serving endpoints of the Service, terminating ones included, since
// they still drain requests on the slots they hold.
func replicas(objs []any, self string) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		port := slicePort(s)
		if port == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || ep.TargetRef.Name == self || len(ep.Addresses) == 0 {
				continue
			}
			serving := ep.Conditions.Serving
			if serving == nil {
				serving = ep.Conditions.Ready
			}
			if serving != nil && !*serving {
				continue
			}
			out[ep.TargetRef.Name] = net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))
		}
	}
	return out
}

// slicePort is the slice's port named http, else its only port.
func slicePort(s *discoveryv1.EndpointSlice) int32 {
	for _, p := range s.Ports {
		if p.Port != nil && (p.Name != nil && *p.Name == "http" || len(s.Ports) == 1) {
			return *p.Port
		}
	}
	return 0
}
