//go:build !gantry_local

package cli

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"gantry.dev/gantry/pkg/backend/kube"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/scaleout"
)

// kubeBackend is what serve's --backend kubernetes sets up: the backend
// and, for a scaled-out gateway (--peers), its replica and API client.
type kubeBackend struct {
	kube    kubernetes.Interface
	ns      string
	be      *kube.Backend
	replica *scaleout.Replica
}

// apply replaces the local runtime serverConfig built with the Kubernetes
// backend, when --backend kubernetes asks for it.
func (f *backendFlags) apply(cfg *gateway.ServerConfig, logger *slog.Logger) error {
	if f.kind != backendKubernetes {
		return nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return fmt.Errorf("kubeconfig namespace: %w", err)
		}
	}
	opts := kube.Options{Logger: logger, NodeSelector: f.nodeSelector, ReadyTimeout: f.readyTimeout}
	if f.peers != "" {
		// Replicas follow until one wins the Lease; none deletes or
		// scales the functions away when it stops, since the others serve.
		opts.Follow, opts.OnClose = true, kube.CloseKeep
		// The pods outlive this replica: what its drain ends keeps its
		// slot until the instance must have finished.
		cfg.Gateway.KeepsInstances = true
		f.k.replica = scaleout.NewReplica()
		cfg.Dispatch.Peers = f.k.replica
		cfg.Gateway.Routes = f.k.replica.Routes()
		if f.k.kube, err = kubernetes.NewForConfig(rc); err != nil {
			return err
		}
		f.k.ns = ns
	}
	be, err := kube.New(rc, ns, opts)
	if err != nil {
		return err
	}
	f.k.be = be
	cfg.Backend = be
	logger.Info("instances run on kubernetes", "host", rc.Host, "namespace", ns)
	return nil
}

// campaign runs a scaled-out replica's election for the Lease of --peers
// until ctx ends or the replica loses it.
func (f *backendFlags) campaign(ctx context.Context, cfg gateway.ServerConfig, srv *gateway.Server, logger *slog.Logger) error {
	return scaleout.Run(ctx, scaleout.Config{Kube: f.k.kube, Namespace: f.k.ns, Service: f.peers,
		Identity: f.podName, Replica: f.k.replica, Lead: f.k.be.Lead, Sign: cfg.Gateway.Auth.Sign,
		Registry: srv.G.Registry(), Logger: logger})
}
