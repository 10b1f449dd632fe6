package localcluster

import (
	"fmt"
	"strings"
)

// The command lines. docs/controlplane.md explains each flag.

func (c *Cluster) etcdArgs() []string {
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.ports.etcdPeer)
	return []string{
		"--name=default",
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=" + c.etcdURL(),
		"--advertise-client-urls=" + c.etcdURL(),
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--unsafe-no-fsync",
	}
}

func (c *Cluster) apiserverArgs() []string {
	args := []string{
		"--etcd-servers=" + c.etcdURL(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.ports.apiserver),
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + c.path("kube-apiserver"),
		"--tls-cert-file=" + c.path("pki", "apiserver.crt"),
		"--tls-private-key-file=" + c.path("pki", "apiserver.key"),
		"--client-ca-file=" + c.path("pki", "ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.path("pki", "sa.pub"),
		"--service-account-signing-key-file=" + c.path("pki", "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
	}
	if c.opts.ProcessNodes > 0 {
		// The API server reaches the process nodes' kubelet API (kubectl
		// logs) with a client certificate, and verifies theirs.
		args = append(args,
			"--kubelet-client-certificate="+c.path("pki", "kubelet-client.crt"),
			"--kubelet-client-key="+c.path("pki", "kubelet-client.key"),
			"--kubelet-certificate-authority="+c.path("pki", "ca.crt"),
			"--kubelet-preferred-address-types=InternalIP")
	}
	if c.opts.Knative {
		// Knative's webhook is a Service whose pods are on a process node:
		// ClusterIPs answer only inside the pods' namespaces (the process
		// node's service proxy), not on the host, so the API server dials
		// the Service's endpoint addresses itself.
		args = append(args, "--enable-aggregator-routing=true")
	}
	if len(c.opts.AuditPolicy) > 0 {
		// Flushed every second, so a benchmark reads an iteration's events
		// soon after it ends.
		args = append(args, "--audit-policy-file="+c.path("audit-policy.yaml"), "--audit-log-path="+c.AuditLogPath(),
			"--audit-log-format=json", "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s")
	}
	if !c.opts.ControllerManager {
		// Without the controller manager nothing creates service accounts
		// or lifts the not-ready taint, so skip the plugins that need that.
		args = append(args, "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
	}
	return args
}

// componentArgs are the flags kube-controller-manager and kube-scheduler share.
func (c *Cluster) componentArgs(name string, port int) []string {
	kubeconfig := c.path(name + ".kubeconfig")
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + c.path(name),
		"--leader-elect=false",
	}
}

func (c *Cluster) controllerManagerArgs() []string {
	return append(c.componentArgs("kube-controller-manager", c.ports.controllerManager),
		"--controllers="+strings.Join(c.controllers(), ","),
		"--use-service-account-credentials=true",
		"--root-ca-file="+c.path("pki", "ca.crt"),
	)
}

func (c *Cluster) schedulerArgs() []string {
	return c.componentArgs("kube-scheduler", c.ports.scheduler)
}

func (c *Cluster) kwokArgs() []string {
	return []string{
		"--kubeconfig=" + c.path("kwok.kubeconfig"),
		"--config=" + c.path("kwok.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		fmt.Sprintf("--server-address=127.0.0.1:%d", c.ports.kwok),
		"--node-lease-duration-seconds=40",
	}
}
