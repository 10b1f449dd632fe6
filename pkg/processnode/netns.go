package processnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultServiceRange is the control plane's Service range
// (--service-cluster-ip-range) that pods route, as pkg/localcluster sets it.
var DefaultServiceRange = netip.MustParsePrefix("10.96.0.0/16")

// podNet is the network of one node's pods, after ../shared/conventions.md:
// packets go only to loopback or into namespaces the project made.
//
//   - A bridge on the host, gantry<i> for the node's /24 of index i in
//     198.18.0.0/15, holds the /24's first address. Its connected route is
//     the host's only route for the /24, so the gateway and the probes
//     reach the pods through it, and nothing else is routed.
//   - Each pod has a network namespace of its own, gantry-<i>-<host
//     byte>, joined to the bridge by a veth pair (gpod<i>-<host byte> on
//     the host, eth0 inside) and holding the pod's address. Its routes are
//     the /24 and the Service range, both on eth0, and no default route: a
//     dial to any other address fails with "network is unreachable"
//     before a packet exists. Nothing on the bridge owns a Service
//     address (there is no kube-proxy), so a dial to a ClusterIP ends in
//     an unanswered ARP on the bridge, not in a packet off the machine.
//   - The host forwards nothing for the pods: they have no route through
//     it, and its forwarding setting is left alone.
//
// The programs run in the namespace through `ip netns exec`, which execs
// them (the pid is the program's) in a mount namespace of their own and
// bind-mounts /etc/netns/NAME/* over /etc for them (mounts.go, hosts.go).
type podNet struct {
	index    int
	prefix   netip.Prefix
	gateway  netip.Addr
	services netip.Prefix
	stateDir string // holds the record Cleanup reads after a crash
}

// Names of what a node of /24 index i creates. Links have at most 15
// characters: "gpod511-254" is the longest.
const (
	bridgePrefix = "gantry"
	nsPrefix     = "gantry-"
	vethPrefix   = "gpod"
	netRecord    = "network" // in the node's folder: the index of its /24
)

func bridgeName(index int) string { return bridgePrefix + strconv.Itoa(index) }

func (n *podNet) nsName(ip netip.Addr) string {
	return fmt.Sprintf("%s%d-%d", nsPrefix, n.index, ip.As4()[3])
}

func (n *podNet) vethName(ip netip.Addr) string {
	return fmt.Sprintf("%s%d-%d", vethPrefix, n.index, ip.As4()[3])
}

// prefixIndex is the index of a /24 of routedSpace.
func prefixIndex(p netip.Prefix) (int, error) {
	if !routedSpace.Contains(p.Addr()) || p.Bits() != 24 {
		return 0, fmt.Errorf("processnode: %s is not a /24 of %s", p, routedSpace)
	}
	b := p.Addr().As4()
	return int(b[1]-routedSpace.Addr().As4()[1])<<8 | int(b[2]), nil
}

// setupPodNet creates the bridge of the /24 prefix (of routedSpace), after
// removing what a crashed node of the same /24 left, and records the /24
// in stateDir so `gantry cluster down` can remove it after a crash too.
// The caller holds the /24's claim.
func setupPodNet(prefix netip.Prefix, services netip.Prefix, stateDir string) (*podNet, error) {
	index, err := prefixIndex(prefix)
	if err != nil {
		return nil, err
	}
	if !services.IsValid() || !services.Addr().Is4() || services.Overlaps(prefix) {
		return nil, fmt.Errorf("processnode: service range %s: want an IPv4 prefix apart from the pods' %s", services, prefix)
	}
	n := &podNet{index: index, prefix: prefix, gateway: prefix.Addr().Next(), services: services, stateDir: stateDir}
	removeNetwork(index)
	// Earlier versions made the /24 local with a route on the host, which
	// would shadow the bridge's: a crashed one may have left it.
	_ = runIP("route", "del", "local", prefix.String(), "dev", "lo", "table", "local")
	if err := os.WriteFile(filepath.Join(stateDir, netRecord), []byte(strconv.Itoa(index)+"\n"), 0o644); err != nil {
		return nil, err
	}
	br := bridgeName(index)
	err = ipBatch("", []string{
		"link add " + br + " type bridge",
		fmt.Sprintf("addr add %s/%d dev %s", n.gateway, prefix.Bits(), br),
		"link set " + br + " up",
	})
	if err != nil {
		removeNetwork(index)
		return nil, err
	}
	return n, nil
}

// addPod creates the pod's namespace with ip on eth0, joined to the
// bridge, and returns its name.
func (n *podNet) addPod(ip netip.Addr) (string, error) {
	ns, veth := n.nsName(ip), n.vethName(ip)
	// A namespace of that name left by a pod whose removal failed goes first.
	n.delPod(ip)
	err := ipBatch("", []string{
		"netns add " + ns,
		"link add " + veth + " type veth peer name eth0 netns " + ns,
		"link set " + veth + " master " + bridgeName(n.index) + " up",
	})
	if err == nil {
		err = ipBatch(ns, []string{
			fmt.Sprintf("addr add %s/%d dev eth0", ip, n.prefix.Bits()),
			"link set lo up",
			"link set eth0 up",
			fmt.Sprintf("route add %s dev eth0", n.services),
		})
	}
	if err != nil {
		n.delPod(ip)
		return "", err
	}
	return ns, nil
}

// Names of the node's service namespace, where its service proxy listens
// (svcproxy.go).
func (n *podNet) serviceNS() string   { return nsPrefix + strconv.Itoa(n.index) + "-svc" }
func (n *podNet) serviceVeth() string { return vethPrefix + strconv.Itoa(n.index) + "-svc" }

// serviceAddr is the service namespace's address on the bridge, the /24's
// last host address, which the node never gives a pod.
func (n *podNet) serviceAddr() netip.Addr { return lastAddr(n.prefix).Prev() }

// addServiceNS creates the node's service namespace: on the bridge at
// serviceAddr, and with the whole Service range local (a local route on
// its loopback), so it answers the pods' ARP for every ClusterIP and its
// sockets may bind any of them. It routes only the /24, and nothing
// leaves it but answers to the pods: the proxy dials the endpoints from
// the host (svcproxy.go).
func (n *podNet) addServiceNS() (string, error) {
	ns, veth := n.serviceNS(), n.serviceVeth()
	_ = runIP("link", "del", veth)
	_ = runIP("netns", "del", ns)
	err := ipBatch("", []string{
		"netns add " + ns,
		"link add " + veth + " type veth peer name eth0 netns " + ns,
		"link set " + veth + " master " + bridgeName(n.index) + " up",
	})
	if err == nil {
		err = ipBatch(ns, []string{
			fmt.Sprintf("addr add %s/%d dev eth0", n.serviceAddr(), n.prefix.Bits()),
			"link set lo up",
			"link set eth0 up",
			fmt.Sprintf("route add local %s dev lo", n.services),
		})
	}
	if err != nil {
		_ = runIP("link", "del", veth)
		_ = runIP("netns", "del", ns)
		return "", err
	}
	return ns, nil
}

// delPod removes the pod's namespace and its veth pair. The host's end is
// deleted by name: a namespace lives on while a process holds it, and the
// pair with it.
func (n *podNet) delPod(ip netip.Addr) {
	_ = runIP("link", "del", n.vethName(ip))
	_ = runIP("netns", "del", n.nsName(ip))
}

// close removes every namespace and link of the node's /24, and the
// record. It does not wait for the kernel to remove the veths of the
// deleted namespaces: that took up to vethGoneWait and then a delete by
// name per link when the machine's namespace clean-up was busy, the bulk
// of a stop. Whoever claims the /24 next removes what is left first
// (setupPodNet, CleanupNetwork), as after a crash.
func (n *podNet) close() {
	startRemoval(n.index)
	_ = os.Remove(filepath.Join(n.stateDir, netRecord))
}

// removeNetwork removes every namespace, veth and bridge of /24 index i,
// and returns once they are gone. It only removes what exists, so it is
// safe on a clean machine. One ip process does it all (-force goes on past
// an error): a stopping node's pods leave their namespaces to it, and an ip
// process each took 10-50 ms at a load average of 30. A veth whose
// namespace goes is not deleted by name (30 ms a link): the kernel removes
// the pair with the namespace, once no process is in it, 50-160 ms later
// for five of them, which it waits for (at most vethGoneWait, then it
// deletes what is left by name).
func removeNetwork(index int) {
	waitLinksGone(index, startRemoval(index))
}

// startRemoval deletes /24 index i's namespaces (their veths go with them,
// once the kernel has torn them down), hosts files, bridge and other
// veths, and returns the veths going with their namespaces.
func startRemoval(index int) map[string]bool {
	var cmds []string
	nsp := nsPrefix + strconv.Itoa(index) + "-"
	withNS := map[string]bool{} // veths going with their namespace
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if suffix, ok := strings.CutPrefix(e.Name(), nsp); ok {
				cmds = append(cmds, "netns del "+e.Name())
				// The service namespace lives on while a socket of the
				// proxy's (a connection it accepted) is open, and its veth
				// with it: that one is deleted by name below.
				if suffix != "svc" {
					withNS[vethPrefix+strconv.Itoa(index)+"-"+suffix] = true
				}
			}
		}
	}
	if entries, err := os.ReadDir(etcNetns); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), nsp) {
				removeHosts(e.Name())
			}
		}
	}
	for _, link := range links(index) {
		if !withNS[link] {
			cmds = append(cmds, "link del "+link)
		}
	}
	ipForce(cmds)
	return withNS
}

// waitLinksGone waits until /24 index i has no links left, at most
// vethGoneWait when veths are going with their namespaces, then deletes
// what is left by name.
func waitLinksGone(index int, withNS map[string]bool) {
	for deadline := time.Now().Add(vethGoneWait); len(withNS) > 0; time.Sleep(10 * time.Millisecond) {
		left := links(index)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var dels []string
			for _, l := range left {
				dels = append(dels, "link del "+l)
			}
			ipForce(dels)
			return
		}
	}
}

// ipForce runs ip's commands in one process, going on past errors.
func ipForce(cmds []string) {
	if len(cmds) > 0 {
		_ = ipCmd(strings.Join(cmds, "\n")+"\n", "-force", "-b", "-")
	}
}

// vethGoneWait bounds the wait for the kernel to remove the veths of
// deleted namespaces.
const vethGoneWait = 2 * time.Second

// links are the host's links of /24 index i: its bridge and veths.
func links(index int) []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	vp := vethPrefix + strconv.Itoa(index) + "-"
	var out []string
	for _, ifc := range ifs {
		if strings.HasPrefix(ifc.Name, vp) || ifc.Name == bridgeName(index) {
			out = append(out, ifc.Name)
		}
	}
	return out
}

// CleanupNetwork removes the namespaces, links and route of the node whose
// folder is dir, if that node is gone without removing them (killed, or
// its process crashed): `gantry cluster down` calls it for each node.
// It does nothing when another live node holds the same /24 by then.
func CleanupNetwork(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, netRecord))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	index, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || index < 0 || index >= 1<<(24-routedSpace.Bits()) {
		return fmt.Errorf("processnode: %s: bad network record %q", dir, data)
	}
	// A killed node's claim may outlive its main thread by a moment (its
	// other threads still close its files), so the claim gets a few
	// seconds to go; a live node keeps it and its network.
	var lock *os.File
	ok := false
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if lock, ok, err = lockPrefix(addressLockDir(), prefixAt(routedSpace, index)); err != nil {
			return err
		}
		if ok || time.Now().After(deadline) {
			break
		}
	}
	if ok {
		removeNetwork(index)
		lock.Close()
	}
	return os.Remove(filepath.Join(dir, netRecord))
}

// ipBatch runs ip's commands in one process, in namespace ns when not "".
func ipBatch(ns string, cmds []string) error {
	args := []string{"-b", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	return ipCmd(strings.Join(cmds, "\n")+"\n", args...)
}

func runIP(args ...string) error { return ipCmd("", args...) }

func ipCmd(stdin string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdin = strings.NewReader(stdin)
	// Its own process group: a terminal's Ctrl-C, which stops the node,
	// must not also kill the command that cleans up after it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s %q: %w: %s", strings.Join(args, " "), strings.TrimSpace(stdin), err, strings.TrimSpace(string(out)))
	}
	return nil
}
