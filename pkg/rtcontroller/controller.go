package rtcontroller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/rtclient"
	"gantry.dev/gantry/pkg/rthttp"
)

// ErrNoConfig is returned by New without a REST config or engine.
var ErrNoConfig = errors.New("rtcontroller: REST config and engine are required")

// controllerUIDIndex indexes pods by the UID of their controlling owner, so an
// owner's pods are one map lookup, never a LIST.
const controllerUIDIndex = "controllerUID"

// Options configures a Controller.
type Options struct {
	// Config is the base REST config. The controller derives two clients
	// from it: one for reconcile writes, ordered by criticality through a
	// PriorityLimiter, and one for watches and events with client-go's
	// plain token bucket.
	Config *rest.Config
	// Namespace limits the controller to one namespace; "" watches all.
	Namespace string
	// Engine runs reconciles; see NewFIFOEngine and NewRTEngine.
	Engine Engine
	// QPS and Burst bound the reconcile client (defaults 50 and 100).
	QPS   float32
	Burst int
	// Resync is the informers' resync period (default 10 minutes).
	Resync time.Duration
	// Registerer receives the controller's metrics; nil disables them.
	Registerer prometheus.Registerer
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Component names the controller in Events.
	Component string
	// CriticalQPS and CriticalBurst size the PriorityLimiter's critical
	// reserve: requests at criticality CriticalFloor and above draw on it
	// when the shared bucket is empty (see WithCriticalReserve). 0 QPS
	// means no reserve.
	CriticalQPS   float32
	CriticalBurst int
	CriticalFloor int
	// PlainLimiter replaces the PriorityLimiter of the reconcile client
	// with client-go's token bucket at the same QPS and burst: the
	// ablation of the client-side priority order.
	PlainLimiter bool
	// SharedConnection sends critical requests over client-go's shared
	// HTTP/2 connection like every other, instead of over rthttp on the
	// worker's own thread (criticalRouter): the ablation of the thread
	// transport.
	SharedConnection bool
	// Trace, if set, receives a ReconcileTrace for every reconcile that
	// starts a new generation: where its time went. It is called on the
	// worker, so it must be quick.
	Trace func(ReconcileTrace)
}

// Controller reconciles RTResources.
type Controller struct {
	opts    Options
	kube    kubernetes.Interface // reconcile writes, priority-limited
	rts     *rtclient.Clients    // reconcile writes, priority-limited
	limiter flowcontrol.RateLimiter
	thread  *rthttp.Transport // critical requests; nil when shared
	seen    seenGenerations   // when each key's generation arrived, for Trace
	written writeTimes        // each key's last status write (statusCoalesce)

	rtInformer  cache.SharedIndexInformer
	podFactory  informers.SharedInformerFactory
	podInformer cache.SharedIndexInformer
	podLister   corelisters.PodLister

	engine   Engine
	queue    Queue
	expect   *expectations
	recorder record.EventRecorder
	events   record.EventBroadcaster
	metrics  *metrics
	clock    clock.Clock
	log      *slog.Logger
	synced   atomic.Bool
	leader   atomic.Bool
}

// New builds a controller; Run starts it.
func New(opts Options) (*Controller, error) {
	if opts.Config == nil || opts.Engine == nil {
		return nil, ErrNoConfig
	}
	opts = withDefaults(opts)
	scheme, err := rtclient.Scheme()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	c := &Controller{opts: opts, engine: opts.Engine, queue: opts.Engine.Queue(),
		expect: newExpectations(opts.Clock), metrics: m, clock: opts.Clock, log: opts.Logger}
	if err := c.buildClients(scheme); err != nil {
		return nil, err
	}
	if err := c.buildInformers(scheme); err != nil {
		return nil, err
	}
	return c, nil
}

func withDefaults(o Options) Options {
	if o.QPS <= 0 {
		o.QPS = 50
	}
	if o.Burst <= 0 {
		o.Burst = 100
	}
	if o.Resync <= 0 {
		o.Resync = 10 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Component == "" {
		o.Component = "gantry-controller"
	}
	return o
}

func (c *Controller) buildClients(scheme *runtime.Scheme) error {
	if c.opts.PlainLimiter {
		c.limiter = flowcontrol.NewTokenBucketRateLimiterWithClock(c.opts.QPS, c.opts.Burst, c.opts.Clock)
	} else {
		c.limiter = NewPriorityLimiter(c.opts.QPS, c.opts.Burst, c.opts.Clock).
			WithCriticalReserve(c.opts.CriticalFloor, c.opts.CriticalQPS, c.opts.CriticalBurst)
	}
	prio := rest.CopyConfig(c.opts.Config)
	if !c.opts.SharedConnection {
		t, err := threadTransport(c.opts.Config)
		if err != nil {
			c.log.Warn("critical requests share the HTTP/2 connection", "reason", err)
		} else {
			c.thread = t
			// Innermost, in place of the base transport only: wrappers the
			// caller put in the config (tracing, recording, auth) still see
			// every request.
			router := func(next http.RoundTripper) http.RoundTripper {
				return newCriticalRouter(c.opts.CriticalFloor, t, next, c.metrics)
			}
			prio.WrapTransport = transport.Wrappers(router, prio.WrapTransport)
		}
	}
	// Both wrappers only time requests whose context asks for it (Trace).
	prio.RateLimiter = timedLimiter{c.limiter}
	prio.Wrap(func(next http.RoundTripper) http.RoundTripper { return timedTransport{next} })
	kube, err := kubernetes.NewForConfig(protobuf(prio))
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	c.kube = kube
	c.rts, err = rtclient.New(prio, scheme)
	if err != nil {
		return err
	}
	bg, err := kubernetes.NewForConfig(protobuf(c.background()))
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	c.events = record.NewBroadcaster()
	c.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: bg.CoreV1().Events("")})
	c.recorder = c.events.NewRecorder(scheme, corev1.EventSource{Component: c.opts.Component})
	c.podFactory = newPodInformerFactory(bg, c.opts.Namespace, c.opts.Resync)
	return nil
}

// newPodInformerFactory watches every pod of the namespace (or cluster),
// as the ReplicaSet controller does. A watch filtered on the owner label
// loses an owned pod the moment someone removes the label: the pod drops
// out of the cache as if deleted, a replacement is created, and the
// unlabelled pod keeps running, never counted or scaled down again. The
// cost is a cache entry per pod; managed fields, often the largest part of
// a pod and never read here, are dropped from it.
func newPodInformerFactory(client kubernetes.Interface, namespace string, resync time.Duration) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithNamespace(namespace), informers.WithTransform(stripManagedFields))
}

func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// protobuf is cfg speaking protobuf to the API server for built-in
// objects (pods, events), as kube-controller-manager's clients do by
// default (--kube-api-content-type): JSON costs both ends more CPU per pod
// created and per watch event decoded, which on a busy control plane is
// latency. Only for the typed Kubernetes clients: custom resources
// (RTResources) have no protobuf form. A content type the caller chose is
// kept.
func protobuf(cfg *rest.Config) *rest.Config {
	if cfg.ContentType != "" {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// background is the config for watches and Events: client-go's plain token
// bucket, at the controller's rate unless the caller chose one, so Events
// from a large scale-up are not throttled to client-go's default 5 qps.
func (c *Controller) background() *rest.Config {
	cfg := rest.CopyConfig(c.opts.Config)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = c.opts.QPS, c.opts.Burst
	}
	return cfg
}

func (c *Controller) buildInformers(scheme *runtime.Scheme) error {
	bg, err := rtclient.New(c.background(), scheme)
	if err != nil {
		return err
	}
	list := bg.Namespace(c.opts.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return list.List(ctx, o)
		},
		WatchFuncWithContext: list.Watch,
	}
	c.rtInformer = cache.NewSharedIndexInformer(lw, &gantryv1.RTResource{}, c.opts.Resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	c.podInformer = c.podFactory.Core().V1().Pods().Informer()
	if err := c.podInformer.AddIndexers(cache.Indexers{controllerUIDIndex: indexByControllerUID, orphanIndex: indexOrphans}); err != nil {
		return fmt.Errorf("pod index: %w", err)
	}
	c.podLister = c.podFactory.Core().V1().Pods().Lister()
	if _, err := c.rtInformer.AddEventHandler(c.rtHandlers()); err != nil {
		return fmt.Errorf("rtresource handler: %w", err)
	}
	if _, err := c.podInformer.AddEventHandler(c.podHandlers()); err != nil {
		return fmt.Errorf("pod handler: %w", err)
	}
	return nil
}

func indexByControllerUID(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// Run starts the informers, waits for their first list, and reconciles until
// ctx ends. Every object in the initial list is reconciled, so work missed
// while the controller was down is picked up.
func (c *Controller) Run(ctx context.Context) error {
	defer c.shutdown()
	// An engine that returns early must not leave shutdown waiting forever
	// for informers that run until ctx ends.
	ictx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	if err := c.startInformers(ictx); err != nil {
		return err
	}
	return c.reconcileWhileActive(ctx)
}

// reconcileWhileActive runs the engine and reports this replica as the
// active one (gantry_rtcontroller_leader 1, IsLeader true) for exactly that
// time, with or without leader election: a replica that reconciles must
// never read as a standby.
func (c *Controller) reconcileWhileActive(ctx context.Context) error {
	c.setLeader(true)
	defer c.setLeader(false)
	return c.engine.Run(ctx, c.boundTo(ctx))
}

// boundTo cancels in-flight reconciles when ctx ends. An engine may drain its
// queue on shutdown, but a replica that lost its lease must stop writing at
// once: the new leader is already acting on the same objects.
func (c *Controller) boundTo(ctx context.Context) Handler {
	return func(hctx context.Context, key Key) error {
		hctx, cancel := context.WithCancel(hctx)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		return c.reconcile(hctx, key)
	}
}

// startInformers fills the caches. Standby replicas do this too, so a new
// leader starts with a warm cache and a queue that already holds every key.
func (c *Controller) startInformers(ctx context.Context) error {
	go c.rtInformer.RunWithContext(ctx)
	c.podFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.rtInformer.HasSynced, c.podInformer.HasSynced) {
		return fmt.Errorf("rtcontroller: caches did not sync: %w", context.Cause(ctx))
	}
	c.synced.Store(true)
	c.log.Info("rtcontroller caches synced", "namespace", c.opts.Namespace)
	return nil
}

func (c *Controller) shutdown() {
	c.queue.ShutDown()
	c.podFactory.Shutdown()
	c.limiter.Stop()
	c.events.Shutdown()
	if c.thread != nil {
		c.thread.Close()
	}
}

// Synced reports whether the informers have completed their first list; the
// readiness probe uses it.
func (c *Controller) Synced() bool { return c.synced.Load() }
