package processnode

// The service proxy. There is no kube-proxy here, so a node with pod
// namespaces answers every Service's ClusterIP:port itself, in the way of
// kube-proxy's old userspace mode: the node's service namespace (netns.go,
// addServiceNS) holds the whole Service range as local addresses and sits
// on the node's bridge, where the pods route that range, so a pod's dial
// to a ClusterIP reaches a listener of the node's process there. Each
// accepted connection is forwarded to a ready endpoint of the Service's
// EndpointSlices at its targetPort, in turn (round-robin), dialled from the
// host, which reaches every node's pods through their bridges (and the
// host's own addresses, such as the API relay's). Nothing else routes the
// Service range, so no packet to a ClusterIP leaves the machine
// (../shared/conventions.md).
//
// Listeners follow the Services: one per TCP port of every Service with a
// ClusterIP, opened when the Service appears and closed when it goes (a
// connection already forwarded runs on until either side closes it).
// Endpoints are read for each new connection, so an endpoint change
// applies to the next connection at once.

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// Bounds of the proxy's work per connection.
const (
	proxyDialTimeout = 3 * time.Second // per endpoint tried
	proxyMaxTries    = 3               // endpoints tried per connection
)

// servicePort names one port of one Service.
type servicePort struct {
	namespace, name string
	port            string // the Service port's name, "" for an unnamed one
}

// serviceProxy answers the Services' ClusterIPs in a network namespace.
type serviceProxy struct {
	netns    string       // where the listeners live
	services netip.Prefix // ClusterIPs outside it are never listened on
	slices   discoverylisters.EndpointSliceLister
	log      *slog.Logger

	mu        sync.Mutex                // guards listeners, conns and closed
	listeners map[string]*proxyListener // by ClusterIP:port
	conns     map[net.Conn]struct{}     // open, either side, so close can end them
	closed    bool
	wg        sync.WaitGroup
}

type proxyListener struct {
	ln     net.Listener
	target atomic.Pointer[servicePort]
	next   atomic.Uint64 // the round-robin's position
}

func newServiceProxy(netns string, services netip.Prefix, slices discoverylisters.EndpointSliceLister, log *slog.Logger) *serviceProxy {
	return &serviceProxy{netns: netns, services: services, slices: slices, log: log,
		listeners: map[string]*proxyListener{}, conns: map[net.Conn]struct{}{}}
}

// wantedListeners is, for every TCP port of every Service with a ClusterIP
// in the range, its ClusterIP:port and what it stands for.
func wantedListeners(services []*corev1.Service, serviceRange netip.Prefix) map[string]servicePort {
	out := map[string]servicePort{}
	for _, svc := range services {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !serviceRange.Contains(ip) {
			continue // headless ("None"), unset, or not ours to answer
		}
		for _, p := range svc.Spec.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				continue
			}
			out[net.JoinHostPort(ip.String(), strconv.Itoa(int(p.Port)))] = servicePort{svc.Namespace, svc.Name, p.Name}
		}
	}
	return out
}

// sync opens the listeners the Services want and closes the others.
func (sp *serviceProxy) sync(services corelisters.ServiceLister) {
	list, err := services.List(labels.Everything())
	if err != nil {
		sp.log.Warn("service proxy: listing Services", "err", err)
		return
	}
	want := wantedListeners(list, sp.services)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return
	}
	for addr, l := range sp.listeners {
		if _, ok := want[addr]; !ok {
			l.ln.Close()
			delete(sp.listeners, addr)
		}
	}
	for addr, target := range want {
		if l, ok := sp.listeners[addr]; ok {
			l.target.Store(&target)
			continue
		}
		ln, err := listenInNetns(sp.netns, addr)
		if err != nil {
			sp.log.Warn("service proxy: listening", "addr", addr, "service", target.namespace+"/"+target.name, "err", err)
			continue
		}
		l := &proxyListener{ln: ln}
		l.target.Store(&target)
		sp.listeners[addr] = l
		sp.wg.Add(1)
		go sp.serve(l)
	}
}

// serve accepts on l until it is closed.
func (sp *serviceProxy) serve(l *proxyListener) {
	defer sp.wg.Done()
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				sp.log.Warn("service proxy: accepting", "addr", l.ln.Addr(), "err", err)
			}
			return
		}
		if !sp.track(conn) {
			conn.Close()
			return
		}
		sp.wg.Add(1)
		go func() {
			defer sp.wg.Done()
			sp.forward(l, conn)
		}()
	}
}

// track records an open connection; false once the proxy is closed.
func (sp *serviceProxy) track(c net.Conn) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return false
	}
	sp.conns[c] = struct{}{}
	return true
}

func (sp *serviceProxy) untrack(c net.Conn) {
	sp.mu.Lock()
	delete(sp.conns, c)
	sp.mu.Unlock()
	c.Close()
}

// forward connects the client to a ready endpoint, trying the next ones in
// turn when a dial fails, and copies both ways until both sides are done.
// With no endpoint to reach the client's connection is closed.
func (sp *serviceProxy) forward(l *proxyListener, client net.Conn) {
	defer sp.untrack(client)
	target := *l.target.Load()
	eps := readyEndpoints(sp.slices, target)
	var backend net.Conn
	for i := range min(len(eps), proxyMaxTries) {
		ep := eps[int((l.next.Add(1)-1)%uint64(len(eps)))]
		c, err := net.DialTimeout("tcp", ep, proxyDialTimeout)
		if err == nil {
			backend = c
			break
		}
		sp.log.Debug("service proxy: dialling an endpoint", "service", target.namespace+"/"+target.name, "endpoint", ep, "try", i+1, "err", err)
	}
	if backend == nil {
		sp.log.Debug("service proxy: no endpoint reached", "service", target.namespace+"/"+target.name, "ready", len(eps))
		return
	}
	if !sp.track(backend) {
		backend.Close()
		return
	}
	defer sp.untrack(backend)
	done := make(chan struct{})
	go func() {
		pipe(backend, client)
		close(done)
	}()
	pipe(client, backend)
	<-done
}

// pipe copies src to dst, then passes the end of src on to dst.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// readyEndpoints are the addresses (ip:targetPort) of the ready endpoints
// of the Service port, in address order. A condition left unset counts as
// ready, as the API defines it.
func readyEndpoints(lister discoverylisters.EndpointSliceLister, target servicePort) []string {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: target.name})
	slices, err := lister.EndpointSlices(target.namespace).List(sel)
	if err != nil {
		return nil
	}
	return endpointAddrs(slices, target.port)
}

func endpointAddrs(slices []*discoveryv1.EndpointSlice, portName string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port := int32(-1)
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == portName && p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
				port = *p.Port
			}
		}
		if port < 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) || len(ep.Addresses) == 0 {
				continue
			}
			a := net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

// close closes every listener and connection and waits for the proxy's
// goroutines.
func (sp *serviceProxy) close() {
	sp.mu.Lock()
	sp.closed = true
	for addr, l := range sp.listeners {
		l.ln.Close()
		delete(sp.listeners, addr)
	}
	for c := range sp.conns {
		c.Close()
	}
	sp.mu.Unlock()
	sp.wg.Wait()
}

// listenInNetns listens on addr in the network namespace netns. The
// socket is made on a thread moved into the namespace for the call and
// moved back: a socket stays in the namespace it was made in. A thread
// that cannot be moved back is left locked, so the runtime ends it rather
// than run other goroutines in the wrong namespace.
func listenInNetns(netns, addr string) (net.Listener, error) {
	target, err := os.Open("/run/netns/" + netns)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("entering %s: %w", netns, err)
	}
	ln, lerr := net.Listen("tcp4", addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// Locked for good: the thread goes when this goroutine ends.
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("leaving %s: %w", netns, err)
	}
	runtime.UnlockOSThread()
	return ln, lerr
}
