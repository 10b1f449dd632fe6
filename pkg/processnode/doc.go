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
// machine (see podNet; it needs CAP_NET_ADMIN and CAP_SYS_ADMIN,
// iproute2, and sh and util-linux's mount for the pods' volumes).
// Without the privilege, pods share the host's network on a /24 of
// 127.64.0.0/10. Each container is one process group, run in its pod's
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
//   - An image dev.local/gantry-fn:NAME with no command runs `gantry fn
//     NAME` (the program "gantry" of Config.Programs, else of PATH) on
//     $PORT, 8080 unless the container sets it: Knative's user-container
//     contract, so an example function is a Knative Service with no image
//     build. In a pod network namespace it listens on all of the pod's
//     addresses (--addr :$PORT), so queue-proxy reaches it on 127.0.0.1
//     and probes on the pod IP.
//   - The environment is PATH, HOME, HOSTNAME (the pod's name),
//     KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (the API server
//     for in-cluster clients: kubernetes.default.svc at the node's API
//     relay, whose address the pod's hosts file gives), then envFrom and
//     env as a kubelet builds them, with $(VAR) expansion and the downward
//     API: fieldRef metadata.name, .namespace, .uid, .labels['k'],
//     .annotations['k'], spec.nodeName, spec.serviceAccountName,
//     status.podIP(s) (the pod's address, which the program must listen
//     on unless the pod has a namespace of its own) and status.hostIP(s),
//     and resourceFieldRef (limits and requests, with divisor; a limit not
//     set is the node's allocatable). configMapKeyRef and secretKeyRef are
//     read from informers.
//   - Volumes (volumes.go, mounts.go): secret, configMap, downwardAPI,
//     emptyDir and projected volumes (secrets, config maps, the downward
//     API and service-account tokens from the TokenRequest API, bound to
//     the pod, with their audience and expiry, requested again at 80% of
//     their lifetime) are folders of the pod's, bind-mounted at their
//     mountPath in a mount namespace of the pod's programs, read-only
//     where asked and always for the first four kinds, so the service
//     account's token, ca.crt and namespace are at
//     /var/run/secrets/kubernetes.io/serviceaccount and client-go's
//     in-cluster config works. Other volume kinds fail the pod. Without a
//     pod network namespace there is no mount namespace either: the
//     pod's status message names each mount it lacks, and environment
//     values naming a mountPath name the folder instead.
//   - Services (svcproxy.go, hosts.go): a userspace service proxy, as
//     kube-proxy's old userspace mode, answers every Service's
//     ClusterIP:port in a service namespace of the node's on its bridge
//     (which alone holds the Service range) and forwards each connection
//     to the next ready endpoint at its targetPort; each pod's /etc/hosts
//     names the API server and every Service (<svc>.<ns>.svc.cluster.local,
//     <svc>.<ns>.svc, <svc>.<ns>, and <svc> in its own namespace) at its
//     ClusterIP, a headless one at a ready endpoint, kept in step with the
//     Services and EndpointSlices.
//   - Output (stdout and stderr) goes to a log per run, timestamped per
//     line and capped (Config.MaxLogBytes); the previous run's is kept.
//     The kubelet API serves it, so kubectl logs works, with --previous,
//     --tail, --since, --timestamps, --limit-bytes and --follow.
//   - Readiness, liveness and startup probes (httpGet, tcpSocket, exec,
//     the last in the container's namespaces and mounts) run with their
//     delays, periods, timeouts and thresholds. Readiness
//     drives the pod's Ready condition, hence its EndpointSlice endpoint; a
//     failed liveness or startup probe kills the program, and the restart
//     policy (Always, OnFailure, Never) with a doubling back-off decides
//     what follows.
//   - Deleting the pod sends SIGTERM to every container's group, and
//     SIGKILL when the grace period (the deletion's, else the pod's
//     terminationGracePeriodSeconds) is over; a later deletion may shorten
//     it. Whatever a program left in its group is killed when it exits.
//     Children also die with the node's process (a parent-death signal).
//   - HTTP probes send their httpHeaders (a Host header sets the
//     request's host), to the pod IP unless the probe names a host.
//
// Init, ephemeral and sidecar containers, hostNetwork, gRPC probes and
// resource limits are not applied: a pod asking for the first four fails
// with the reason in its status; limits are not enforced. An emptyDir's
// sizeLimit is not enforced either (a Memory one is a folder of
// /dev/shm), and config map and secret volumes follow their objects within
// a minute.
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
