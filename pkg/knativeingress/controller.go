package knativeingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Config configures a Controller.
type Config struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Class is the ingress class served (default Class).
	Class string
	// SystemNamespace holds Knative's config-network, whose ingress-class
	// is the class of Ingresses without the annotation (default
	// knative-serving).
	SystemNamespace string
	// ClusterDomain is the cluster's DNS domain (default cluster.local):
	// cluster-local hosts are also served by their short forms.
	ClusterDomain string
	// PublicLoadBalancer and PrivateLoadBalancer are what the Ingresses'
	// status publishes as the external and cluster-local addresses: an IP
	// address goes in the ip field, a name in domainInternal. Knative's
	// Route makes its placeholder Service from the private one (an
	// Endpoints object at the IP, which must not be loopback, or an
	// ExternalName Service at the name). Defaults: DefaultPublicLB and
	// DefaultPrivateLB.
	PublicLoadBalancer, PrivateLoadBalancer string
	// Timeout bounds a request from its arrival to the end of its answer
	// (default DefaultTimeout): past it the answer is 504, or cut.
	Timeout time.Duration
	// Resync is how often a failed status write is tried again (default
	// 1 s).
	Resync time.Duration
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultSystemNamespace = "knative-serving"
	DefaultClusterDomain   = "cluster.local"
	DefaultPublicLB        = "gantry-ingress.knative-serving.svc.cluster.local"
	DefaultPrivateLB       = "gantry-ingress-local.knative-serving.svc.cluster.local"
	// DefaultTimeout is Knative's default max-revision-timeout-seconds
	// (600 s): no revision may ask for longer.
	DefaultTimeout = 10 * time.Minute
	// MaxTimeout bounds Config.Timeout.
	MaxTimeout = time.Hour
)

func (c Config) withDefaults() (Config, error) {
	if c.Kube == nil || c.Dynamic == nil {
		return c, errors.New("knativeingress: Config.Kube and Config.Dynamic are required")
	}
	c.Class = cmp.Or(c.Class, Class)
	c.SystemNamespace = cmp.Or(c.SystemNamespace, DefaultSystemNamespace)
	c.ClusterDomain = cmp.Or(c.ClusterDomain, DefaultClusterDomain)
	c.PublicLoadBalancer = cmp.Or(c.PublicLoadBalancer, DefaultPublicLB)
	c.PrivateLoadBalancer = cmp.Or(c.PrivateLoadBalancer, DefaultPrivateLB)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Resync = cmp.Or(c.Resync, time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Timeout < 0 || c.Timeout > MaxTimeout {
		return c, fmt.Errorf("knativeingress: timeout %v: want (0, %v]", c.Timeout, MaxTimeout)
	}
	for _, lb := range []string{c.PublicLoadBalancer, c.PrivateLoadBalancer} {
		if err := CheckLoadBalancer(lb); err != nil {
			return c, fmt.Errorf("knativeingress: %w", err)
		}
	}
	return c, nil
}

// CheckLoadBalancer checks an address to publish in an Ingress's status:
// an IP address that Kubernetes accepts in an Endpoints object (Knative's
// Route makes one at it), or a DNS name.
func CheckLoadBalancer(lb string) error {
	if ip, err := netip.ParseAddr(lb); err == nil {
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			return fmt.Errorf("load balancer %s: Kubernetes refuses loopback, link-local and unspecified endpoint addresses; publish a name or a routable address", lb)
		}
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(lb); len(errs) > 0 {
		return fmt.Errorf("load balancer %q: neither an IP address nor a DNS name: %s", lb, strings.Join(errs, "; "))
	}
	return nil
}

// Controller reconciles the KIngresses of its class into a routing table
// and serves it: External() and Local() are the two listeners' handlers.
type Controller struct {
	cfg      Config
	router   *router
	ingInf   cache.SharedIndexInformer
	cmInf    cache.SharedIndexInformer
	kubeInfs informers.SharedInformerFactory
	dynInfs  dynamicinformer.DynamicSharedInformerFactory
	kick     chan struct{}
	synced   chan struct{}

	mu      sync.Mutex // guards written
	written map[string]string
}

// New builds a Controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, kick: make(chan struct{}, 1), synced: make(chan struct{}), written: map[string]string{}}
	c.kubeInfs = informers.NewSharedInformerFactory(cfg.Kube, 0)
	res := &resolver{services: c.kubeInfs.Core().V1().Services().Lister(),
		slices: c.kubeInfs.Discovery().V1().EndpointSlices().Lister()}
	c.router = newRouter(res, cfg.Timeout, cfg.Logger)
	c.dynInfs = dynamicinformer.NewDynamicSharedInformerFactory(cfg.Dynamic, 0)
	c.ingInf = c.dynInfs.ForResource(GVR).Informer()
	cmFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0, informers.WithNamespace(cfg.SystemNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", configNetwork).String()
		}))
	c.cmInf = cmFactory.Core().V1().ConfigMaps().Informer()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.poke() },
		UpdateFunc: func(any, any) { c.poke() },
		DeleteFunc: func(any) { c.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{c.ingInf, c.cmInf} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// External serves the ExternalIP rules; Local serves every rule, for
// clients in the cluster.
func (c *Controller) External() http.Handler { return c.router.handler(false) }

// Local serves every rule: cluster-local and external.
func (c *Controller) Local() http.Handler { return c.router.handler(true) }

// Synced is closed once the caches have synced and the first table is in
// place.
func (c *Controller) Synced() <-chan struct{} { return c.synced }

func (c *Controller) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run watches until ctx ends. Every change to an Ingress or to
// config-network rebuilds the whole table, swaps it in, and then writes
// the status of each Ingress whose routing changed: an Ingress is marked
// Ready only once the table that routes it serves.
func (c *Controller) Run(ctx context.Context) error {
	c.kubeInfs.Start(ctx.Done())
	c.dynInfs.Start(ctx.Done())
	go c.cmInf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.ingInf.HasSynced, c.cmInf.HasSynced) {
		return ctx.Err()
	}
	for typ, ok := range c.kubeInfs.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("knativeingress: %v cache did not sync: %w", typ, ctx.Err())
		}
	}
	retry := time.NewTimer(0)
	defer retry.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
		case <-retry.C:
		}
		if err := c.sync(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("knative ingress: status", "err", err)
			retry.Reset(c.cfg.Resync)
		}
		if first {
			close(c.synced)
			first = false
		}
	}
}
