package knativert

import (
	"context"
	"errors"
	"fmt"
	"net"

	"k8s.io/client-go/kubernetes"
)

// RunConfig is what `gantry controller --knative` runs.
type RunConfig struct {
	Options
	Address string // where the webhook listens, e.g. ":8443"
	Serve   ServeOptions
}

// Run serves the webhook and reconciles until ctx ends: it makes or loads
// the certificate, registers the webhook with the apiserver, listens, and
// runs the reconciler. Every replica serves the webhook; the reconciler's
// writes are idempotent, so replicas running it side by side converge.
func Run(ctx context.Context, cfg RunConfig) error {
	c, err := New(cfg.Options)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg.Config)
	if err != nil {
		return err
	}
	cert, ca, err := Certificate(cfg.Serve)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return fmt.Errorf("knative webhook: %w", err)
	}
	if err := Register(ctx, kube, cfg.Serve.URL, ca); err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	serveErr := make(chan error, 1)
	go func() {
		err := Serve(ctx, ln, c.Webhook(), cert)
		if err != nil {
			cancel(fmt.Errorf("knative webhook: %w", err))
		}
		serveErr <- err
	}()
	runErr := c.Run(ctx)
	cancel(nil)
	return errors.Join(runErr, <-serveErr)
}
