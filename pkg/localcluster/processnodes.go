package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/processnode"
)

// MaxProcessNodes bounds Options.ProcessNodes: each node claims a /24 of pod
// addresses and runs in the cluster's process.
const MaxProcessNodes = 16

// podStopGrace is how long a pod gets between SIGTERM and SIGKILL when
// the cluster stops. The control plane goes at the same moment, so a pod's
// orderly exit saves nothing, and Knative's activator and queue-proxy drain
// for seconds on SIGTERM: they always take the whole grace.
const podStopGrace = 200 * time.Millisecond

// ProcessNodeName is the name of the i-th process node (from 0).
func ProcessNodeName(i int) string { return fmt.Sprintf("process-node-%d", i) }

func (o Options) validateProcessNodes() error {
	switch {
	case o.ProcessNodes < 0 || o.ProcessNodes > MaxProcessNodes:
		return fmt.Errorf("localcluster: %d process nodes, want 0 to %d", o.ProcessNodes, MaxProcessNodes)
	case o.ProcessNodes > 0 && !(o.Scheduler && o.ControllerManager):
		return errors.New("localcluster: process nodes need the scheduler and the controller manager (their pods are scheduled, their endpoints published)")
	case o.Nodes+o.ProcessNodes < 1:
		return errors.New("localcluster: no nodes")
	}
	return nil
}

// controllers are the controller manager's controllers: the endpoint
// controllers too when process nodes run, since their pods serve traffic:
// EndpointSlices of Services with selectors, the Endpoints objects that
// Knative's serverless services and its ingress conformance suite read,
// and EndpointSlices mirrored from Endpoints that Knative writes for its
// selector-less public Services (which Gantry's Knative ingress reads);
// and the ClusterRole aggregation controller with Knative.
func (c *Cluster) controllers() []string {
	if c.opts.ProcessNodes == 0 {
		return controllers
	}
	out := append(slices.Clone(controllers), "endpointslice-controller", "endpoints-controller", "endpointslice-mirroring-controller")
	if c.opts.Knative {
		// Knative's service accounts are bound to knative-serving-admin,
		// an aggregated ClusterRole: without this controller it has no
		// rules and every component is refused.
		out = append(out, "clusterrole-aggregation-controller")
	}
	return out
}

// writeKubeletClientCert writes the certificate the API server presents to
// the process nodes' kubelet API.
func (c *Cluster) writeKubeletClientCert() error {
	if c.opts.ProcessNodes == 0 {
		return nil
	}
	id, err := c.ca.client("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	if err := writeFile(c.path("pki", "kubelet-client.crt"), id.certPEM); err != nil {
		return err
	}
	return writeFile(c.path("pki", "kubelet-client.key"), id.keyPEM)
}

// startProcessNodes starts the process nodes in this process, each with its
// working folder in the cluster's, its log in logs/, and the kubelet API
// on a certificate of the cluster CA that the API server trusts.
func (c *Cluster) startProcessNodes(ctx context.Context) error {
	if c.opts.ProcessNodes == 0 {
		return nil
	}
	serving, err := c.ca.server()
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(serving.certPEM, serving.keyPEM)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.cert)
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	id, err := c.ca.client("gantry-processnode", "system:masters")
	if err != nil {
		return err
	}
	rc := rest.CopyConfig(c.admin)
	rc.CertData, rc.KeyData = id.certPEM, id.keyPEM
	rc.QPS, rc.Burst = 50, 100
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	for i := range c.opts.ProcessNodes {
		name := ProcessNodeName(i)
		logf, err := os.OpenFile(c.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		n, err := processnode.Start(ctx, processnode.Config{
			Name: name, Client: client, Dir: c.path(name),
			Programs: c.opts.Programs, Images: c.opts.Images, MaxPods: c.opts.NodePods,
			TLS: tlsCfg, Logger: slog.New(slog.NewTextHandler(logf, nil)), ShutdownGrace: podStopGrace,
			APIServer: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports.apiserver)),
		})
		if err != nil {
			logf.Close()
			return fmt.Errorf("process node %s: %w", name, err)
		}
		c.pnodes = append(c.pnodes, n)
		c.pnodeLogs = append(c.pnodeLogs, logf)
		if !n.Routed() {
			// Said where the user looks: the node's own warning goes to its
			// log, and the cluster came up "ready" while nothing could
			// reach its pods (a README block then timed out a minute later).
			c.progress("WARNING: process node %s has no pod network (network namespaces need root: CAP_NET_ADMIN and CAP_SYS_ADMIN): "+
				"its pods share this machine's network on %s, which EndpointSlices refuse, so no Service, gateway "+
				"(gantry serve --backend kubernetes) or Knative reaches them; run as root", name, n.Addresses())
		}
	}
	c.progress("%d process node(s) registered", c.opts.ProcessNodes)
	return nil
}

// ProcessNodes are the running process nodes, in node order. Each one's
// Dir holds pods/<namespace>_<name>_<uid>/ with the containers' logs; its
// Routed says whether the EndpointSlice controller can publish its pods.
func (c *Cluster) ProcessNodes() []*processnode.Node { return slices.Clone(c.pnodes) }

// stopProcessNodes stops the process nodes and their pods, all at once.
func (c *Cluster) stopProcessNodes() error {
	errs := make([]error, len(c.pnodes))
	var wg sync.WaitGroup
	for i, n := range c.pnodes {
		wg.Go(func() { errs[i] = n.Stop() })
	}
	wg.Wait()
	for _, f := range c.pnodeLogs {
		f.Close()
	}
	c.pnodes, c.pnodeLogs = nil, nil
	return errors.Join(errs...)
}
