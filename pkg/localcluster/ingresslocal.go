package localcluster

import (
	"context"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/processnode"
)

// Pods reach a Knative Service by its cluster-local name
// (<svc>.<ns>.svc.cluster.local): Knative makes that name an ExternalName
// Service pointing at the ingress's private load balancer,
// knative-serving/gantry-ingress-local (pkg/knativeingress's
// DefaultPrivateLB). The ingress's cluster-local listener is on the host's
// loopback, which a pod cannot reach (its 127.0.0.1 is its own), and the
// API server refuses loopback addresses in EndpointSlices. So the cluster
// relays the first process node's bridge address (the pods' host IP,
// which every node's service proxy dials from the host) to that listener,
// and makes the Service with an EndpointSlice at the relay: the process
// nodes name it in the pods' hosts files, ExternalName Services through
// it, and answer its ClusterIP.
const (
	privateLBService   = "gantry-ingress-local"
	privateLBNamespace = "knative-serving"
)

// exposeLocalIngress relays the first namespaced process node's bridge
// address to the ingress's cluster-local listener and publishes the relay
// as knative-serving/gantry-ingress-local. Without namespaced nodes pods
// share the host's loopback and nothing is needed.
func (c *Cluster) exposeLocalIngress(ctx context.Context, kube kubernetes.Interface) error {
	var host string
	for _, n := range c.pnodes {
		if _, addr := n.Bridge(); addr.IsValid() {
			host = addr.String()
			break
		}
	}
	if host == "" || c.ingress == nil {
		return nil
	}
	r, err := processnode.StartRelay(net.JoinHostPort(host, "0"), c.ingress.LocalAddr(), "Knative cluster-local relay", c.ingressLogger)
	if err != nil {
		return err
	}
	_, portStr, _ := net.SplitHostPort(r.Addr())
	p, _ := strconv.Atoi(portStr)
	port := int32(p)
	if err := publishPrivateLB(ctx, kube, host, port); err != nil {
		r.Close()
		return err
	}
	c.localRelay = r
	c.progress("Knative cluster-local ingress for pods: %s.%s.svc (relayed from %s)", privateLBService, privateLBNamespace,
		net.JoinHostPort(host, strconv.Itoa(int(port))))
	return nil
}

// publishPrivateLB makes the selector-less Service gantry-ingress-local
// (port 80) and its EndpointSlice at addr:port.
func publishPrivateLB(ctx context.Context, kube kubernetes.Interface, addr string, port int32) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: privateLBService, Namespace: privateLBNamespace},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := kube.CoreV1().Services(privateLBNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: privateLBService, Namespace: privateLBNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: privateLBService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port)}},
	}
	_, err := kube.DiscoveryV1().EndpointSlices(privateLBNamespace).Create(ctx, slice, metav1.CreateOptions{})
	return err
}
