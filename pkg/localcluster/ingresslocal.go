package localcluster

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
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

// localRelay copies each connection accepted on ln to target.
type localRelay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{} // open, closed by close
}

func startLocalRelay(addr, target string) (*localRelay, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &localRelay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Go(r.serve)
	return r, nil
}

func (r *localRelay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.wg.Go(func() { r.relay(c) })
	}
}

func (r *localRelay) relay(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		return // the client sees its connection closed, as when no endpoint answers
	}
	defer up.Close()
	if !r.track(c, up) {
		return
	}
	defer r.untrack(c, up)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // the client's end of the request
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	<-done
}

// track records open connections so close can end them; false once closed.
func (r *localRelay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *localRelay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

// close stops accepting, ends every open connection and waits for the
// copies: the ingress behind it is stopping too.
func (r *localRelay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}

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
	r, err := startLocalRelay(net.JoinHostPort(host, "0"), c.ingress.LocalAddr())
	if err != nil {
		return err
	}
	port := int32(r.ln.Addr().(*net.TCPAddr).Port)
	if err := publishPrivateLB(ctx, kube, host, port); err != nil {
		r.close()
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
