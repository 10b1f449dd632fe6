package processnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// newTestPodNet claims a /24 of routedSpace and makes its bridge, as a
// node does; the test is skipped where this process may not (no root).
func newTestPodNet(t *testing.T) *podNet {
	t.Helper()
	prefix, _ := claimTestPrefix(t)
	pn := setupTestPodNet(t, prefix, t.TempDir())
	t.Cleanup(pn.close) // before the claim's release
	return pn
}

// ipRoutes is `ip -j [-n ns] route show ARGS`.
func ipRoutes(t *testing.T, ns string, args ...string) []map[string]any {
	t.Helper()
	argv := []string{"-j"}
	if ns != "" {
		argv = append(argv, "-n", ns)
	}
	out, err := exec.Command("ip", append(append(argv, "route", "show"), args...)...).Output()
	if err != nil {
		t.Fatalf("ip %v route show %v: %v", argv, args, err)
	}
	var routes []map[string]any
	if err := json.Unmarshal(out, &routes); err != nil {
		t.Fatalf("ip route: %v: %s", err, out)
	}
	return routes
}

// routeDsts lists routes as "DST dev DEV", those through dev only when
// dev is not "".
func routeDsts(routes []map[string]any, dev string) []string {
	var out []string
	for _, r := range routes {
		if d := fmt.Sprint(r["dev"]); dev == "" || d == dev {
			out = append(out, fmt.Sprintf("%v dev %s", r["dst"], d))
		}
	}
	slices.Sort(out)
	return out
}

// Every pod gets a network namespace of its own on the node's bridge; the
// namespaces route only the node's /24 and the Service range, so a pod's
// dial to any other address fails without a packet, a ClusterIP dial
// stays on the bridge, where the node's service namespace answers it (the
// service proxy forwarding a Service's port from the host to a pod, and
// refusing a port no Service has), and the host reaches the pods through
// the bridge alone. Netfilter counters on the host and in a pod's namespace
// check where packets went; pods and node leave nothing behind.
func TestPodNetworkNamespacesSendNothingElsewhere(t *testing.T) {
	pn := newTestPodNet(t)
	br := bridgeName(pn.index)
	tn := newTestNodeOn(t, 8, pn)

	// The host reaches the pods through the bridge only.
	if got, want := routeDsts(ipRoutes(t, ""), br), []string{pn.prefix.String() + " dev " + br}; !slices.Equal(got, want) {
		t.Errorf("host routes on %s = %v, want %v", br, got, want)
	}
	if rs := ipRoutes(t, "", "table", "local", pn.prefix.String()); len(rs) != 0 {
		t.Errorf("host has local routes for the pods' %s: %v", pn.prefix, rs)
	}

	host := newCounters(t, "")
	notLocal := []match{ifName(false, br, false), ifName(false, "lo", false)}
	host.add("to_pods", nftables.ChainHookPostrouting, ifName(false, br, true), addrIn(false, pn.prefix, true))
	host.add("from_pods_out", nftables.ChainHookPostrouting, append(notLocal, addrIn(true, pn.prefix, true))...)
	host.add("to_pods_out", nftables.ChainHookPostrouting, append(notLocal, addrIn(false, pn.prefix, true))...)
	// Pod-to-pod packets are bridged, and with br_netfilter they pass
	// these hooks too, in and out on the bridge: they do not count.
	// Nor do those to the Service range, bridged to the service namespace;
	// none of those may leave through another interface than a project
	// bridge: every node has the same Service range, and another test's
	// node may run beside this one on its own bridge (go test runs
	// packages in parallel), so any bridge named like ours is allowed.
	host.add("pods_beyond_host", nftables.ChainHookPrerouting, ifName(true, br, true),
		addrIn(false, pn.prefix, false), addrIn(false, DefaultServiceRange, false))
	host.add("services_off_bridge", nftables.ChainHookPostrouting, ifPrefix(false, bridgePrefix, false),
		ifName(false, "lo", false), addrIn(false, DefaultServiceRange, true))
	host.add("forwarded", nftables.ChainHookForward, ifName(true, br, true), ifName(false, br, false))
	host.commit(t)

	tn.create(t, servePod("server"))
	server := tn.waitFor(t, "server", "Ready", 30*time.Second, podReady)
	if got := server.Status.HostIP; got != pn.gateway.String() {
		t.Errorf("host IP %q, want the bridge's %s", got, pn.gateway)
	}
	serverAddr := net.JoinHostPort(server.Status.PodIP, strconv.Itoa(int(testPort)))
	if code, _ := get(t, "http://"+serverAddr+"/healthz"); code != 200 {
		t.Errorf("GET from the host to the pod: %d", code)
	}

	// The host listens on the bridge (reachable) and on loopback (a pod's
	// 127.0.0.1 is its own).
	onBridge, err := net.Listen("tcp", net.JoinHostPort(pn.gateway.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer onBridge.Close()
	onLoopback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer onLoopback.Close()
	// The service proxy: a Service at 10.96.0.10:80 whose endpoint is the
	// server pod at testPort, from listers the test fills.
	svcNS, err := pn.addServiceNS()
	if err != nil {
		t.Fatal(err)
	}
	if rs := routeDsts(ipRoutes(t, svcNS), ""); !slices.Equal(rs, []string{pn.prefix.String() + " dev eth0"}) {
		t.Errorf("the service namespace routes %v, want only the /24", rs)
	}
	proxy := newTestServiceProxy(t, svcNS, server.Status.PodIP, testPort)
	defer proxy.close()
	external, clusterIP, service := "203.0.113.7:80", "10.96.0.1:443", "10.96.0.10:80"
	targets := []string{serverAddr, onBridge.Addr().String(), onLoopback.Addr().String(), external, clusterIP, service}
	dialer := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dialer", UID: types.UID("uid-dialer")},
		Spec: corev1.PodSpec{NodeName: "test-node", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Command: []string{"helper"}, Env: []corev1.EnvVar{
				{Name: helperEnv, Value: "dial"}, {Name: "DIAL", Value: strings.Join(targets, ",")}}}}},
	}
	tn.create(t, dialer)
	tn.waitFor(t, "dialer", "Running", 30*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	r := tn.p.get("ns/dialer")
	if r == nil || r.netns == "" {
		t.Fatal("the dialer pod has no network namespace")
	}
	if server := tn.p.get("ns/server"); server.netns == r.netns {
		t.Fatalf("two pods share the namespace %s", r.netns)
	}

	// Each namespace routes the node's /24 and the Service range on eth0,
	// with no default route in any table.
	for _, name := range []string{"server", "dialer"} {
		ns := tn.p.get("ns/" + name).netns
		want := []string{DefaultServiceRange.String() + " dev eth0", pn.prefix.String() + " dev eth0"}
		if got := routeDsts(ipRoutes(t, ns), ""); !slices.Equal(got, want) {
			t.Errorf("pod %s: routes %v, want %v", name, got, want)
		}
		for _, rt := range ipRoutes(t, ns, "table", "all") {
			if rt["dst"] == "default" {
				t.Errorf("pod %s: a default route: %v", name, rt)
			}
		}
	}

	pod := newCounters(t, filepath.Join("/run/netns", r.netns))
	pod.add("to_services", nftables.ChainHookOutput, addrIn(false, DefaultServiceRange, true))
	pod.add("elsewhere", nftables.ChainHookOutput, addrIn(false, pn.prefix, false),
		addrIn(false, DefaultServiceRange, false), addrIn(false, netip.MustParsePrefix("127.0.0.0/8"), false))
	pod.commit(t)
	if err := os.WriteFile(filepath.Join(r.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tn.waitFor(t, "dialer", "Succeeded", 60*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	logs := podLog(t, tn, "dialer")
	for _, want := range []string{
		"dial " + serverAddr + ": ok",                       // another pod
		"dial " + onBridge.Addr().String() + ": ok",         // the host, at the pod's host IP
		"dial " + onLoopback.Addr().String() + ": dial tcp", // the pod's own loopback: refused
		"dial " + external + ": dial tcp " + external + ": connect: network is unreachable",
		"dial " + clusterIP + ": dial tcp " + clusterIP + ": connect: connection refused", // no Service has it
		"dial " + service + ": ok",                                                        // the service proxy
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the dialer's log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, clusterIP+": ok") || strings.Contains(logs, onLoopback.Addr().String()+": ok") {
		t.Errorf("a dial that must fail went through:\n%s", logs)
	}

	if n := host.packets(t, "to_pods"); n == 0 {
		t.Error("no packet from the host to the pods counted on the bridge: the counters count nothing")
	}
	for _, name := range []string{"from_pods_out", "to_pods_out", "pods_beyond_host", "services_off_bridge", "forwarded"} {
		if n := host.packets(t, name); n != 0 {
			t.Errorf("host counter %s: %d packets, want 0", name, n)
		}
	}
	if n := pod.packets(t, "to_services"); n == 0 {
		t.Error("the dialer's ClusterIP packets were not counted in its namespace")
	}
	if n := pod.packets(t, "elsewhere"); n != 0 {
		t.Errorf("the dialer sent %d packets outside the pods' /24 and the Service range", n)
	}

	// Pods leave nothing behind: namespace and veth pair go with them.
	for _, name := range []string{"server", "dialer"} {
		r := tn.p.get("ns/" + name)
		ns, veth := r.netns, pn.vethName(r.ip)
		tn.delete(t, name, 1)
		tn.gone(t, name, 10*time.Second)
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pod %s's namespace %s is still there: %v", name, ns, err)
		}
		if _, err := net.InterfaceByName(veth); err == nil {
			t.Errorf("pod %s's link %s is still there", name, veth)
		}
	}
	pn.close()
	assertNoNetwork(t, pn)
}

// newTestServiceProxy answers 10.96.0.10:80 in netns, forwarding to
// podIP:port, with listers the test fills instead of informers.
func newTestServiceProxy(t *testing.T, netns, podIP string, port int32) *serviceProxy {
	t.Helper()
	name, ready := "http", true
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	services, slices := idx(), idx()
	if err := services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: name, Port: 80}}}}); err != nil {
		t.Fatal(err)
	}
	if err := slices.Add(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports:     []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{podIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}}); err != nil {
		t.Fatal(err)
	}
	sp := newServiceProxy(netns, DefaultServiceRange, discoverylisters.NewEndpointSliceLister(slices), slog.New(slog.DiscardHandler))
	sp.sync(corelisters.NewServiceLister(services))
	if len(sp.listeners) != 1 {
		t.Fatalf("the service proxy listens on %d addresses, want 1", len(sp.listeners))
	}
	return sp
}

func podLog(t *testing.T, tn *testNode, name string) string {
	t.Helper()
	rc, err := tn.p.GetContainerLogs(context.Background(), "ns", name, "main", api.ContainerLogOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertNoNetwork checks that nothing of pn's is left: no namespace, no
// link, no route for its /24.
func assertNoNetwork(t *testing.T, pn *podNet) {
	t.Helper()
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), nsPrefix+strconv.Itoa(pn.index)+"-") {
				t.Errorf("namespace %s left behind", e.Name())
			}
		}
	}
	// A stopped node does not wait for the kernel to remove the veths of
	// its deleted namespaces (podNet.close): they must go on their own.
	var left []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = links(pn.index)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, l := range left {
		t.Errorf("link %s left behind", l)
	}
	if rs := ipRoutes(t, "", "table", "all", pn.prefix.String()); len(rs) != 0 {
		t.Errorf("routes for %s left behind: %v", pn.prefix, rs)
	}
	if _, err := os.Stat(filepath.Join(pn.stateDir, netRecord)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the network record is still there: %v", err)
	}
}

// A node killed before it could clean up leaves its bridge, namespaces (its
// service namespace too) and links; CleanupNetwork, which `gantry cluster down` runs on each node's
// folder, removes them once the node's claim on its /24 is gone.
func TestCleanupNetworkRemovesWhatAKilledNodeLeft(t *testing.T) {
	prefix, lock := claimTestPrefix(t)
	dir := t.TempDir()
	pn := setupTestPodNet(t, prefix, dir)
	defer removeNetwork(pn.index)
	ip := pn.gateway.Next()
	if _, err := pn.addPod(ip); err != nil {
		t.Fatal(err)
	}
	if _, err := pn.addServiceNS(); err != nil {
		t.Fatal(err)
	}
	// While the node holds its claim, cleanup leaves its network alone.
	if err := CleanupNetwork(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := net.InterfaceByName(bridgeName(pn.index)); err != nil {
		t.Fatalf("cleanup removed a live node's bridge: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, netRecord), []byte(strconv.Itoa(pn.index)), 0o644); err != nil {
		t.Fatal(err)
	}
	lock.Close() // the node dies
	if err := CleanupNetwork(dir); err != nil {
		t.Fatal(err)
	}
	assertNoNetwork(t, pn)
	if err := CleanupNetwork(dir); err != nil {
		t.Errorf("a second cleanup: %v", err)
	}
}

// A node's stop does not wait for the kernel to tear down its pods'
// namespaces and veths, so the next node of the same /24 (a restarted
// cluster) may find veths still going: it starts all the same, its pods
// at the same addresses, and nothing is left once it stops in turn.
func TestTheSamePrefixIsSetUpAgainRightAfterAStop(t *testing.T) {
	prefix, _ := claimTestPrefix(t)
	var pn *podNet
	for round := range 2 {
		pn = setupTestPodNet(t, prefix, t.TempDir())
		for ip := pn.gateway.Next(); ip != pn.gateway.Next().Next().Next().Next(); ip = ip.Next() {
			if _, err := pn.addPod(ip); err != nil {
				t.Fatalf("round %d, pod %s: %v", round, ip, err)
			}
		}
		if _, err := pn.addServiceNS(); err != nil {
			t.Fatalf("round %d, service namespace: %v", round, err)
		}
		pn.close()
	}
	assertNoNetwork(t, pn)
}

// claimTestPrefix claims a free /24 for a test that makes network
// namespaces (skipped under -short); the claim is released when the test
// ends, unless the test closes the lock first.
func claimTestPrefix(t *testing.T) (netip.Prefix, *os.File) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: makes network namespaces")
	}
	prefix, lock, err := claimPrefix(addressLockDir(), routedSpace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	return prefix, lock
}

// setupTestPodNet sets up prefix's bridge, as a node does, or skips the
// test where this process may not (no root: CAP_NET_ADMIN, CAP_SYS_ADMIN).
func setupTestPodNet(t *testing.T, prefix netip.Prefix, dir string) *podNet {
	t.Helper()
	pn, err := setupPodNet(prefix, DefaultServiceRange, dir)
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("pod network namespaces need root: %v", err)
		}
		t.Fatal(err)
	}
	return pn
}
