package processnode

// Names. There is no kube-proxy and no cluster DNS: a ClusterIP answers
// nothing (netns.go). So each pod with a network namespace gets a hosts
// file of its own, /etc/netns/<namespace>/hosts, which `ip netns exec`
// bind-mounts over /etc/hosts for its programs. It names:
//
//   - the pod itself (its name at its address) and localhost;
//   - the API server, as kubernetes.default.svc.cluster.local,
//     kubernetes.default.svc and kubernetes.default (and kubernetes in the
//     namespace default), at the node's API relay (apirelay.go);
//   - every Service, as <svc>.<ns>.svc.cluster.local, <svc>.<ns>.svc and
//     <svc>.<ns> (and <svc> in the pod's own namespace): at its ClusterIP,
//     which the node's service proxy answers (svcproxy.go), so a client
//     reaches the Service's port whatever its targetPort; a headless
//     Service (clusterIP: None) at the address of one ready endpoint of
//     its EndpointSlices (the first in address order), and not at all
//     while it has none; an ExternalName Service whose externalName is
//     another Service's name in this cluster (<svc>.<ns>.svc[.cluster.local],
//     how Knative names a Service's cluster-local address: an ExternalName
//     to its ingress's private load balancer) at that Service's address, as
//     cluster DNS would follow the CNAME; other ExternalNames not at all.
//
// The files follow the Services and EndpointSlices: each is rewritten in
// place (not renamed, so the bind mounts see the new content) when what
// it says changes.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// etcNetns is where `ip netns exec` finds the files it mounts over /etc.
var etcNetns = "/etc/netns"

// hostsTable is what the pods' hosts files say about the cluster.
type hostsTable struct {
	apiAddr string // the API relay's address, "" when pods do not reach the API server

	mu       sync.Mutex        // guards services
	services map[string]string // "<svc>.<ns>" -> address
}

// serviceAddrs is the address of each Service: its ClusterIP, or for a
// headless Service with a ready endpoint among the slices, the address of
// its first ready endpoint; for an ExternalName Service naming another
// Service of the cluster, that Service's address. Other ExternalName
// Services have none.
func serviceAddrs(services []*corev1.Service, slices []*discoveryv1.EndpointSlice) map[string]string {
	out := map[string]string{}
	headless := map[string]bool{}
	aliases := map[string]string{} // ExternalName "<svc>.<ns>" -> the "<svc>.<ns>" it names
	for _, svc := range services {
		key := svc.Name + "." + svc.Namespace
		switch ip := svc.Spec.ClusterIP; {
		case svc.Spec.Type == corev1.ServiceTypeExternalName:
			if target, ok := clusterServiceName(svc.Spec.ExternalName); ok {
				aliases[key] = target
			}
		case ip == corev1.ClusterIPNone:
			headless[key] = true
		case ip != "":
			out[key] = ip
		}
	}
	cands := map[string][]string{}
	for _, s := range slices {
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" || s.AddressType != discoveryv1.AddressTypeIPv4 || !headless[svc+"."+s.Namespace] {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if len(ep.Addresses) > 0 {
				key := svc + "." + s.Namespace
				cands[key] = append(cands[key], ep.Addresses[0])
			}
		}
	}
	for k, addrs := range cands {
		sort.Strings(addrs)
		out[k] = addrs[0]
	}
	// An alias names a Service with an address, or another alias: follow
	// at most maxAliasHops, so a loop of ExternalNames ends.
	for k, target := range aliases {
		for range maxAliasHops {
			if addr, ok := out[target]; ok {
				out[k] = addr
				break
			}
			next, ok := aliases[target]
			if !ok {
				break
			}
			target = next
		}
	}
	return out
}

// maxAliasHops bounds how many ExternalName Services a name is followed
// through.
const maxAliasHops = 4

// clusterServiceName returns "<svc>.<ns>" for an externalName that names a
// Service of this cluster: <svc>.<ns>.svc or <svc>.<ns>.svc.cluster.local,
// with or without the final dot.
func clusterServiceName(name string) (string, bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	rest, ok := strings.CutSuffix(name, ".svc.cluster.local")
	if !ok {
		rest, ok = strings.CutSuffix(name, ".svc")
	}
	if !ok || strings.Count(rest, ".") != 1 {
		return "", false
	}
	return rest, true
}

// set replaces the Services' addresses; it reports whether they changed.
func (h *hostsTable) set(m map[string]string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(m) == len(h.services) {
		same := true
		for k, v := range m {
			if h.services[k] != v {
				same = false
				break
			}
		}
		if same {
			return false
		}
	}
	h.services = m
	return true
}

// render is the hosts file of pod name in namespace ns at podIP.
func (h *hostsTable) render(ns, name, podIP string) []byte {
	var b bytes.Buffer
	b.WriteString("# written by the process node for pod " + ns + "/" + name + "\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	fmt.Fprintf(&b, "%s\t%s\n", podIP, name)
	if h == nil {
		return b.Bytes()
	}
	line := func(addr, svc, sns string) {
		fmt.Fprintf(&b, "%s\t%s.%s.svc.cluster.local %s.%s.svc %s.%s", addr, svc, sns, svc, sns, svc, sns)
		if sns == ns {
			b.WriteString(" " + svc)
		}
		b.WriteByte('\n')
	}
	if h.apiAddr != "" {
		line(h.apiAddr, "kubernetes", "default")
	}
	h.mu.Lock()
	keys := make([]string, 0, len(h.services))
	for k := range h.services {
		if k != "kubernetes.default" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		svc, sns, _ := strings.Cut(k, ".")
		line(h.services[k], svc, sns)
	}
	h.mu.Unlock()
	return b.Bytes()
}

// hostsPath is the hosts file of the pod in network namespace netns.
func hostsPath(netns string) string { return filepath.Join(etcNetns, netns, "hosts") }

// writeHosts writes the pod's hosts file in place when it changed.
func writeHosts(netns string, content []byte) error {
	p := hostsPath(netns)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, content) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	// In place: the pods' bind mounts hold this file, not its name.
	return os.WriteFile(p, content, 0o644)
}

// removeHosts removes the pod's folder under /etc/netns.
func removeHosts(netns string) { _ = os.RemoveAll(filepath.Join(etcNetns, netns)) }

// refreshHosts recomputes the Services' addresses and rewrites every
// pod's hosts file if they changed.
func (p *Provider) refreshHosts(svcs corelisters.ServiceLister, lister discoverylisters.EndpointSliceLister) {
	slices, err := lister.List(labels.Everything())
	if err != nil {
		p.cfg.Logger.Warn("listing EndpointSlices", "err", err)
		return
	}
	services, err := svcs.List(labels.Everything())
	if err != nil {
		p.cfg.Logger.Warn("listing Services", "err", err)
		return
	}
	if !p.cfg.Hosts.set(serviceAddrs(services, slices)) {
		return
	}
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	for _, r := range runs {
		r.writeHosts()
	}
}

// writeHosts writes the pod's hosts file, if it has a network namespace
// and has not stopped. The pod's lock is held throughout, so the file is
// never written again once finish has removed it.
func (r *podRun) writeHosts() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeHostsLocked()
}

func (r *podRun) writeHostsLocked() {
	if r.netns == "" || r.hostsGone || !r.ip.IsValid() {
		return
	}
	if err := writeHosts(r.netns, r.p.cfg.Hosts.render(r.pod.Namespace, r.pod.Name, r.ip.String())); err != nil {
		r.p.cfg.Logger.Warn("writing a pod's hosts file", "pod", r.key, "err", err)
	}
}
