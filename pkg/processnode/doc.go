// Package processnode is a Kubernetes node whose pods are local processes.
// It is built on the virtual-kubelet library: virtual-kubelet registers the
// node, renews its lease, watches the pods bound to it and writes their
// status; this package's Provider runs them.
//
// # A pod as processes
//
// Each pod gets an address of its own as its pod IP, and a folder of its
// own, its working directory and $HOME. The addresses are a /24 of
// 198.18.0.0/15, since the API server refuses loopback addresses in
// EndpointSlices: each pod has a network namespace of its own, joined by a
// veth pair to a bridge the node makes on the host, which holds the /24's
// first address (the pods' host IP). The namespaces route the /24 and the
// Service range and nothing else, so no packet of a pod leaves the
// machine (see podNet; it needs CAP_NET_ADMIN and CAP_SYS_ADMIN, and
// iproute2). Without the privilege, pods share the host's network on a /24
// of 127.64.0.0/10. Each container is one process group, run in its pod's
// namespace:
//
//   - The program is the container's command and args, as Kubernetes
//     defines them. Images are never pulled: a container without a command
//     runs what Config.Images maps its image to, and fails to start (a
//     StartError, then CrashLoopBackOff) if the map has no entry.
//   - A program named without a slash is looked up in PATH, whose first
//     folder holds Config.Programs (e.g. "gantry" -> the gantry binary),
//     so ["gantry", "fn", "echo"] and ["/bin/sh", "-c", "gantry fn echo"]
//     both run it.
//   - The environment is PATH, HOME, HOSTNAME (the pod's name), then
//     envFrom and env as a kubelet builds them, with $(VAR) expansion and
//     the downward API: fieldRef status.podIP is the pod's address, which
//     the program must listen on (ports of different pods may then be the
//     same). configMapKeyRef and secretKeyRef are read from informers.
//   - Output (stdout and stderr) goes to a log per run, timestamped per
//     line and capped (Config.MaxLogBytes); the previous run's is kept.
//     The kubelet API serves it, so kubectl logs works, with --previous,
//     --tail, --since, --timestamps, --limit-bytes and --follow.
//   - Readiness, liveness and startup probes (httpGet, tcpSocket, exec)
//     run with their delays, periods, timeouts and thresholds. Readiness
//     drives the pod's Ready condition, hence its EndpointSlice endpoint; a
//     failed liveness or startup probe kills the program, and the restart
//     policy (Always, OnFailure, Never) with a doubling back-off decides
//     what follows.
//   - Deleting the pod sends SIGTERM to every container's group, and
//     SIGKILL when the grace period (the deletion's, else the pod's
//     terminationGracePeriodSeconds) is over; a later deletion may shorten
//     it. Whatever a program left in its group is killed when it exits.
//     Children also die with the node's process (a parent-death signal).
//
// Init, ephemeral and sidecar containers, hostNetwork, gRPC probes, volume
// mounts and resource limits are not applied: a pod asking for the first
// four fails with the reason in its status; limits and volumes (such as
// the service account token every pod gets) are ignored, except Secret
// volumes (volumes.go): written into a private folder of the pod's, and
// each environment value naming the mount's path rewritten to it.
//
// # The node
//
// Start registers the node with its capacity (this machine's CPUs and
// memory, MaxPods pods, at most the addresses it can hand out), Ready and
// no pressure conditions, 127.0.0.1 as its address and, with Config.TLS,
// the kubelet API's port; virtual-kubelet then renews its lease. The node
// is labelled type=process, so a nodeSelector can pick it beside kwok's
// type=kwok nodes. Nodes on one machine claim different /24s by a lock file
// each, so concurrent clusters never share a pod address or a bridge. Stop
// stops every pod within ShutdownGrace (500 ms) and removes the namespaces
// and the bridge; CleanupNetwork removes what a killed node left.
package processnode
