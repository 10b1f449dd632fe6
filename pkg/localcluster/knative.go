package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"gantry.dev/gantry/pkg/knativeinstall"
)

// knativeTimeout bounds installing Knative and waiting for it, after the
// control plane is ready; its target is 2 minutes with cached binaries
// (docs/knative.md), so this leaves room for a loaded machine.
const knativeTimeout = 5 * time.Minute

func (o Options) validateKnative() error {
	if o.Knative && o.ProcessNodes < 1 {
		return errors.New("localcluster: Knative needs a process node (its components run there as pods)")
	}
	if o.KnativeIngress != "" && !o.Knative {
		return errors.New("localcluster: a Knative ingress needs Knative")
	}
	if o.KnativeDomain != "" {
		if errs := validation.IsDNS1123Subdomain(o.KnativeDomain); len(errs) > 0 {
			return fmt.Errorf("localcluster: Knative domain %q: %s", o.KnativeDomain, strings.Join(errs, "; "))
		}
	}
	return nil
}

// withKnativeImages adds the Knative images (ko://knative.dev/serving/cmd/X
// to the built binaries) to the process nodes' image map.
func (o Options) withKnativeImages() Options {
	if !o.Knative {
		return o
	}
	images := maps.Clone(o.Images)
	if images == nil {
		images = map[string][]string{}
	}
	maps.Copy(images, knativeinstall.Images(knativeinstall.BinDir()))
	o.Images = images
	return o
}

// installKnative applies Knative's rendered manifests and waits until its
// components are Available and its webhook admits a Service.
func (c *Cluster) installKnative(ctx context.Context) error {
	if !c.opts.Knative {
		return nil
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, knativeTimeout)
	defer cancel()
	objs, err := knativeinstall.Load(knativeinstall.ConfigDir(), knativeinstall.Settings{Domain: c.opts.KnativeDomain})
	if err != nil {
		return err
	}
	if err := knativeinstall.Install(ctx, c.admin, objs); err != nil {
		return fmt.Errorf("installing Knative: %w", err)
	}
	c.progress("Knative Serving %s applied (%d objects, %.1f s)", knativeinstall.ServingVersion, len(objs), time.Since(t0).Seconds())
	if err := knativeinstall.WaitReady(ctx, c.admin); err != nil {
		return fmt.Errorf("Knative did not get ready: %w (the process node's log %s has its pods' failures)", err, c.path("logs", ProcessNodeName(0)+".log"))
	}
	c.progress("Knative ready in %.1f s: controller, webhook, autoscaler and activator Available, the webhook admitting Services", time.Since(t0).Seconds())
	return c.startKnativeIngress()
}

// Ingress is a Knative ingress running in the cluster's process.
type Ingress interface {
	ExternalAddr() string
	LocalAddr() string
	Shutdown(context.Context) error
}

// IngressStarter starts a Knative ingress listening at addr, with the
// cluster's clients, logging to log.
type IngressStarter func(kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, addr string) (Ingress, error)

// startKnativeIngress runs Gantry's Knative ingress in this process at
// Options.KnativeIngress, its log in logs/knative-ingress.log.
func (c *Cluster) startKnativeIngress() error {
	if c.opts.KnativeIngress == "" {
		return nil
	}
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(c.path("logs", "knative-ingress.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if c.opts.StartIngress == nil {
		logf.Close()
		return errors.New("localcluster: Options.KnativeIngress needs Options.StartIngress")
	}
	c.ingressLogger = slog.New(slog.NewTextHandler(logf, nil))
	srv, err := c.opts.StartIngress(kube, dyn, c.ingressLogger, c.opts.KnativeIngress)
	if err != nil {
		logf.Close()
		return fmt.Errorf("Knative ingress at %s: %w", c.opts.KnativeIngress, err)
	}
	c.ingress, c.ingLog = srv, logf
	c.progress("Knative ingress at http://%s, cluster-local at http://%s", srv.ExternalAddr(), srv.LocalAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.exposeLocalIngress(ctx, kube)
}

// KnativeIngressAddr is where the Knative ingress serves Services by their
// host names, "" without one.
func (c *Cluster) KnativeIngressAddr() string {
	if c.ingress == nil {
		return ""
	}
	return c.ingress.ExternalAddr()
}

// stopKnativeIngress stops the ingress first, so no request is proxied to a
// pod being stopped; open requests get a second.
func (c *Cluster) stopKnativeIngress() error {
	if c.localRelay != nil {
		c.localRelay.Close()
		c.localRelay = nil
	}
	if c.ingress == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := c.ingress.Shutdown(ctx)
	c.ingLog.Close()
	c.ingress, c.ingLog = nil, nil
	return err
}
