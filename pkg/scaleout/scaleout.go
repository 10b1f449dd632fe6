// Package scaleout runs a gateway as one of several replicas of a
// Deployment behind one Service. Every replica serves requests with its
// own dispatcher, which this package wraps (Replica, replica.go); a Lease
// elects the one that decides for all of them (the Leader), and that
// replica syncs with every other one each Interval (syncer.go): it sends
// the slots the replica may use on each instance and takes back its
// samples, queue and holdings (Grant and Report, wire.go), the way
// Knative's autoscaler scrapes every queue-proxy. The replicas are the
// serving endpoints of the Service's EndpointSlices, found by the pod
// each names (endpoints.go).
//
// A replica that loses the Lease stops: Run returns, and the process
// exits for its Deployment to restart it as a follower, as
// kube-controller-manager does. Followers never write to the cluster.
package scaleout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLostLease ends Run on a replica that led and no longer does.
var ErrLostLease = errors.New("lost the gateway's leader lease")

// Config is one replica's part.
type Config struct {
	Kube      kubernetes.Interface
	Namespace string
	// Service is the Service whose endpoints are the replicas; the Lease
	// has its name.
	Service string
	// Identity is this replica's pod name, as its endpoint names it.
	Identity string
	// Replica is this replica's layer over its dispatcher, a follower
	// to start with.
	Replica *Replica
	// Lead runs when this replica wins the Lease, before its dispatcher
	// leads: the backend starts writing to the cluster. An error gives
	// the Lease up.
	Lead func(ctx context.Context) error
	// Sign adds the credentials a follower's sync route asks for.
	Sign func(r *http.Request)
	// Interval is how often the leader syncs with every replica (default
	// 100 ms): a slot moving between replicas takes one round.
	Interval time.Duration
	// Lease timings (default 15 s, 10 s, 2 s, client-go's usual).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Registry receives the replica's scale-out metrics (none if nil).
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

func (c *Config) defaults() error {
	switch {
	case c.Kube == nil || c.Replica == nil || c.Lead == nil:
		return errors.New("scaleout: Kube, Replica and Lead are required")
	case c.Service == "" || c.Namespace == "":
		return errors.New("scaleout: the replicas' Service and namespace are required")
	case c.Identity == "":
		return errors.New("scaleout: this replica's identity (its pod name) is required")
	}
	if c.Interval <= 0 {
		c.Interval = 100 * time.Millisecond
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if c.Sign == nil {
		c.Sign = func(*http.Request) {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Run campaigns for the Lease until ctx ends. A replica that wins leads
// until ctx ends (nil) or it loses the Lease (ErrLostLease).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	m := newMetrics(cfg.Registry)
	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Kube, 10*time.Minute,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=" + cfg.Service
		}))
	slicesInf := factory.Discovery().V1().EndpointSlices().Informer()
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Service},
		Client:     cfg.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	var led, lost bool
	var mu sync.Mutex
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline,
		RetryPeriod: cfg.RetryPeriod, ReleaseOnCancel: true, Name: cfg.Service,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				led = true
				mu.Unlock()
				m.leader.Set(1)
				defer m.leader.Set(0)
				if err := lead(lctx, cfg, slicesInf, m); err != nil && lctx.Err() == nil {
					cfg.Logger.Error("leading failed", "err", err)
				}
			},
			OnStoppedLeading: func() {
				mu.Lock()
				lost = led && ctx.Err() == nil
				mu.Unlock()
			},
			OnNewLeader: func(id string) {
				cfg.Logger.Info("gateway leader", "identity", id, "self", id == cfg.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	mu.Lock()
	defer mu.Unlock()
	if lost || (led && ctx.Err() == nil) {
		return ErrLostLease
	}
	return nil
}

// lead makes this replica the one that decides, then syncs with every
// other replica each Interval until ctx ends.
func lead(ctx context.Context, cfg Config, inf cache.SharedIndexInformer, m *metrics) error {
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("the EndpointSlices of service %s did not sync", cfg.Service)
	}
	for {
		err := cfg.Lead(ctx)
		if err == nil {
			break
		}
		cfg.Logger.Warn("taking over the cluster objects failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err := cfg.Replica.Lead(); err != nil {
		return err
	}
	cfg.Logger.Info("leading: deciding for every gateway replica", "service", cfg.Service)
	s := &syncer{cfg: cfg, client: &http.Client{Timeout: 2 * time.Second}, busy: map[string]bool{}, m: m}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.wg.Wait()
			return nil
		case <-t.C:
			s.round(ctx, replicas(inf.GetStore().List(), cfg.Identity))
		}
	}
}
