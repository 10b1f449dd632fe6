package knativeingress

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	// HTTPSPort is the port clients reach the HTTPS listener at, which
	// redirects name (httpOption Redirected); 0 when there is no HTTPS
	// listener: an Ingress with spec.tls or Redirected is then refused.
	// With it, Secrets of type kubernetes.io/tls are watched in every
	// namespace. StartListeners sets it from the HTTPS listener's port.
	HTTPSPort int
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
	if c.HTTPSPort < 0 || c.HTTPSPort > 65535 {
		return c, fmt.Errorf("knativeingress: HTTPS port %d: want [0, 65535]", c.HTTPSPort)
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
	secInf   cache.SharedIndexInformer // nil without HTTPS
	certs    *secretCerts              // nil without HTTPS
	kubeInfs informers.SharedInformerFactory
	secInfs  informers.SharedInformerFactory
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
	c.router = newRouter(res, cfg.Timeout, cfg.HTTPSPort, cfg.Logger)
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
	infs := []cache.SharedIndexInformer{c.ingInf, c.cmInf}
	if cfg.HTTPSPort != 0 {
		// Only TLS Secrets: a rotation is an update event, and the next
		// sync parses the new key pair.
		c.secInfs = informers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()
		}))
		c.secInf = c.secInfs.Core().V1().Secrets().Informer()
		c.certs = newSecretCerts(c.secInfs.Core().V1().Secrets().Lister())
		infs = append(infs, c.secInf)
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// External serves the ExternalIP rules over plain HTTP, redirecting
// those of Ingresses with httpOption Redirected to HTTPS.
func (c *Controller) External() http.Handler { return c.router.handler(externalHTTP) }

// Local serves every rule, cluster-local and external, over plain HTTP,
// for clients in the cluster.
func (c *Controller) Local() http.Handler { return c.router.handler(localHTTP) }

// HTTPS serves the ExternalIP rules over TLS (TLSConfig's connections).
func (c *Controller) HTTPS() http.Handler { return c.router.handler(externalHTTPS) }

// TLSConfig is the HTTPS listener's: the certificate by the client's
// server name (SNI) from the current table, HTTP/2 and HTTP/1.1 offered
// (net/http adds the protocols). A name no Ingress has a certificate for
// fails the handshake: no certificate is served for a host it does not
// name.
func (c *Controller) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := strings.ToLower(hello.ServerName)
		if cert, ok := c.router.table.Load().certs[name]; ok {
			return cert, nil
		}
		return nil, fmt.Errorf("knative ingress: no certificate for server name %q", name)
	}}
}

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
	synced := []cache.InformerSynced{c.ingInf.HasSynced, c.cmInf.HasSynced}
	if c.secInfs != nil {
		c.secInfs.Start(ctx.Done())
		synced = append(synced, c.secInf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
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
