package localcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

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
	return nil
}
