// Package scaleout runs a gateway as one of several replicas of a
// Deployment behind one Service. Every replica serves requests with its
// own dispatcher; a Lease elects the one whose dispatcher decides for all
// of them (dispatch.Leader), and that replica syncs with every other one
// each Interval: it sends the slots the replica may use on each instance
// and takes back its samples, queue and holdings (dispatch.Grant and
// dispatch.Report), the way Knative's autoscaler scrapes every
// queue-proxy. The replicas are the serving endpoints of the Service's
// EndpointSlices, found by the pod each names.
//
// A replica that loses the Lease stops: Run returns, and the process
// exits for its Deployment to restart it as a follower, as
// kube-controller-manager does. Followers never write to the cluster.
package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
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

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
)

// MaxReport bounds a follower's answer: a full queue of the largest
// bound with its samples fits many times over.
const MaxReport = 64 << 20

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
	// Dispatcher is this replica's, a dispatch.Follower to start with.
	Dispatcher *dispatch.Dispatcher
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
	case c.Kube == nil || c.Dispatcher == nil || c.Lead == nil:
		return errors.New("scaleout: Kube, Dispatcher and Lead are required")
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
	if err := cfg.Dispatcher.Lead(); err != nil {
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

// syncer runs the leader's rounds. One replica's syncs never overlap, as
// dispatch.Fold requires: a replica still busy from the last round is
// skipped this one.
type syncer struct {
	cfg    Config
	client *http.Client
	wg     sync.WaitGroup
	mu     sync.Mutex
	busy   map[string]bool
	m      *metrics
}

func (s *syncer) round(ctx context.Context, peers map[string]string) {
	d := s.cfg.Dispatcher
	if err := d.SetPeers(slices.Sorted(maps.Keys(peers))); err != nil {
		s.cfg.Logger.Error("too many gateway replicas", "err", err)
		return
	}
	s.m.peers.Set(float64(len(peers)))
	for id, addr := range peers {
		s.mu.Lock()
		if s.busy[id] {
			s.mu.Unlock()
			continue
		}
		s.busy[id] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { s.mu.Lock(); delete(s.busy, id); s.mu.Unlock() }()
			start := time.Now()
			err := s.sync(ctx, id, addr)
			s.m.syncTime.Observe(time.Since(start).Seconds())
			switch {
			case err == nil:
				s.m.syncs.WithLabelValues("ok").Inc()
			case ctx.Err() == nil:
				s.m.syncs.WithLabelValues("error").Inc()
				s.cfg.Logger.Warn("sync with a gateway replica failed", "replica", id, "addr", addr, "err", err)
			}
		}()
	}
}

// sync sends one replica its grant and folds in its report.
func (s *syncer) sync(ctx context.Context, id, addr string) error {
	g, ok := s.cfg.Dispatcher.GrantFor(id)
	if !ok {
		return nil // no longer a replica, or no longer leading
	}
	body, err := json.Marshal(g)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+gateway.PeerSyncPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	s.cfg.Sign(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var rep dispatch.Report
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxReport)).Decode(&rep); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return s.cfg.Dispatcher.Fold(id, rep)
}

// replicas maps every other replica (its pod) to its gateway's address:
// the serving endpoints of the Service, terminating ones included, since
// they still drain requests on the slots they hold.
func replicas(objs []any, self string) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		port := slicePort(s)
		if port == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || ep.TargetRef.Name == self || len(ep.Addresses) == 0 {
				continue
			}
			serving := ep.Conditions.Serving
			if serving == nil {
				serving = ep.Conditions.Ready
			}
			if serving != nil && !*serving {
				continue
			}
			out[ep.TargetRef.Name] = net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))
		}
	}
	return out
}

// slicePort is the slice's port named http, else its only port.
func slicePort(s *discoveryv1.EndpointSlice) int32 {
	for _, p := range s.Ports {
		if p.Port != nil && (p.Name != nil && *p.Name == "http" || len(s.Ports) == 1) {
			return *p.Port
		}
	}
	return 0
}
