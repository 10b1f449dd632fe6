// Package localcluster runs a real Kubernetes control plane on loopback for
// tests, benchmarks and demos: etcd, kube-apiserver and kwok, and optionally
// kube-scheduler and kube-controller-manager. kwok plays the kubelets: it
// marks nodes Ready and keeps their leases, and marks pods bound to its nodes
// Running and Ready.
//
// The binaries are the pinned versions `make controlplane` builds into
// CacheDir(); RequireBinaries says what is missing. docs/controlplane.md lists
// the versions, how to bump them and every flag the components get.
//
// # Starting a cluster
//
//	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 3, Scheduler: true, ControllerManager: true})
//	if err != nil { ... }
//	defer c.Stop()
//	client := kubernetes.NewForConfigOrDie(c.RESTConfig())
//
// Start generates a CA, certificates and a service-account key into the
// working folder, picks free ports, writes an admin kubeconfig
// (KubeconfigPath, user gantry-admin in system:masters) and returns once every
// component is healthy, the nodes (NodeName(0), NodeName(1), ...) are Ready
// and, with the controller manager, schedulable and default/default exists.
// RBAC is on; the scheduler and controller manager use their own identities
// (system:kube-scheduler, system:kube-controller-manager with per-controller
// service accounts), as in a kubeadm cluster. Each component's log is a file
// (LogPaths); a failed Start quotes the end of the log at fault.
//
// With ControllerManager the controllers are those a workload needs:
// deployment, replicaset, statefulset, daemonset, job, disruption, garbage
// collector, namespace, service account, root CA publisher, pod GC, node
// lifecycle and taint eviction, with kube-controller-manager's default client
// limits (20 QPS, burst 30). Without it, the ServiceAccount and
// TaintNodesByCondition admission plugins are off, since nothing would create
// service accounts or lift the not-ready taint.
//
// # One cluster per test package
//
//	func TestMain(m *testing.M) {
//		os.Exit(localcluster.RunMain(m, localcluster.Options{Scheduler: true, ControllerManager: true}))
//	}
//
//	func TestSomething(t *testing.T) {
//		c := localcluster.Shared(t) // starts the cluster on first use; skips under -short
//		...
//	}
//
// Tests share the cluster, so each should work in its own namespace. RunMain
// stops the cluster when the tests end or on SIGINT/SIGTERM, and removes its
// folder unless a test failed, when it prints the log paths instead.
//
// # Processes
//
// Each component runs in its own process group with a parent-death signal, so
// it dies with the process that started it even if that process crashes. Stop
// stops everything together, within about a second: the Knative ingress, the
// process nodes (their pods get 200 ms between SIGTERM and SIGKILL), kwok, the
// scheduler and the controller manager (SIGTERM, SIGKILL after 500 ms), and
// kube-apiserver and etcd with SIGKILL at once, since the cluster's data goes
// with it. A temp folder left by a process that died without Stop is removed
// by the next Start.
//
// # Knative
//
// With Options.Knative, Start also installs Knative Serving (`make knative`
// builds it; pkg/knativeinstall renders and applies its manifests) and
// returns once it is ready: its components run as pods of Knative's own
// Deployments on the process nodes, whose image map sends Knative's
// ko:// images to the built binaries. kube-apiserver then runs with
// --enable-aggregator-routing=true (it reaches Knative's webhook at the
// pod's address: the host does not route the Service range, whose
// ClusterIPs answer only inside the pods' namespaces), and the controller
// manager also runs the ClusterRole aggregation, Endpoints and
// EndpointSlice mirroring controllers Knative relies on. With
// Options.KnativeIngress, Gantry's Knative ingress (pkg/knativeingress)
// serves there from the cluster's process, stopped first by Stop.
//
// Up, Serve, Down and Env run a cluster detached from the terminal for
// `gantry cluster up/down/env`.
package localcluster
