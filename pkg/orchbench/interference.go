package orchbench

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/rtclient"
	"gantry.dev/gantry/pkg/rtcontroller"
)

// Interference is the orchestration benchmark's create/delete churn, for
// another benchmark to run beside its own load (gantry bench e2e).
type Interference struct {
	Kube kubernetes.Interface
	// RTs, when set, makes the churn objects RTResources of criticality
	// 0 (the Gantry cases); otherwise they are Deployments (vanilla).
	RTs       *rtclient.Clients
	Namespace string
	// NodeSelector is the churn pods' nodeSelector, e.g. type=kwok so
	// they stay off a process node.
	NodeSelector map[string]string
	// IntervalPeriod separates bursts in interval mode.
	IntervalPeriod time.Duration
	// ChurnRate caps continuous mode's objects per second; 0 is back to
	// back.
	ChurnRate float64
}

// Run creates and deletes single-pod objects in c's mode and burst until
// ctx ends, and returns how many it created.
func (i Interference) Run(ctx context.Context, c Case) int {
	var t target = deployments{kube: i.Kube, churnNS: i.Namespace, churnNodes: i.NodeSelector}
	if i.RTs != nil {
		t = rtresources{rts: i.RTs, churnNS: i.Namespace, churnNodes: i.NodeSelector}
	}
	return churnLoop(ctx, ctx, t, c, 0, pacing{period: i.IntervalPeriod, rate: i.ChurnRate})
}

// InstallController installs the RTResource CRD and the controller's RBAC
// and APF objects, as the orchestration benchmark does before its Gantry
// cases.
func InstallController(ctx context.Context, cfg *rest.Config, crdPath, configDir string) error {
	if err := installCRD(ctx, cfg, crdPath); err != nil {
		return err
	}
	return installIdentity(ctx, cfg, configDir)
}

// StartController runs the Gantry controller in-process as the
// orchestration benchmark's gantry case does (as its service account,
// every namespace, no leader election), without reconcile traces. The
// channel yields its end.
func StartController(ctx context.Context, cfg *rest.Config, app rtcontroller.AppConfig) <-chan error {
	app.Options.Config = asController(cfg)
	app.Options.Namespace = ""
	app.HTTPAddress = ""
	app.LeaderElect = false
	if app.Options.Logger == nil {
		app.Options.Logger = slog.New(slog.DiscardHandler)
	}
	done := make(chan error, 1)
	go func() { done <- rtcontroller.RunApp(ctx, app) }()
	return done
}
