// Package gateway is Gantry's HTTP front door. It speaks OpenFaaS's gateway
// API, so faas-cli and existing clients work unchanged, adds apps (chains of
// functions), and hands every invocation to the dispatcher, which queues it
// in the policy's order and lends it an instance's slot. Handlers stay thin:
// read and bound the body, find the input size, acquire, forward, release.
package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gantry.dev/gantry/pkg/async"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/funclogs"
	"gantry.dev/gantry/pkg/secrets"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

// DefaultMaxBody bounds a request or response body (HTTP 413 past it).
const DefaultMaxBody = 64 << 20

// Config configures a gateway.
type Config struct {
	Dispatcher *dispatch.Dispatcher
	// MaxBody bounds request and response bodies (default 64 MiB).
	MaxBody int64
	// Auth guards the management routes; nil leaves them open.
	Auth *Auth
	// Orchestration names the backend in /system/info.
	Orchestration string
	Logger        *slog.Logger
	// Registry receives the gateway's metrics (default: a new one, with
	// the Go runtime's and the process's collectors).
	Registry *prometheus.Registry
	// Routes are more management routes, by pattern, behind Auth like
	// the others: what a layer over the dispatcher serves (pkg/scaleout's
	// sync between replicas).
	Routes map[string]http.Handler
	// HungGrace is how long past its function's timeout an instance may
	// take to finish a request that was answered 504 before the instance
	// is deemed hung and replaced (default DefaultHungGrace).
	HungGrace time.Duration
	// Async is the queue /async-function publishes to (nil: the route
	// answers 503).
	Async *async.Queue
	// State is the gateway's state folder: what the API deploys, updates
	// and scales is kept there (persist.go). Nil keeps nothing.
	State *statedir.Dir
	// KeepsInstances says the instances outlive this gateway (the
	// replicas of a scaled-out gateway share them): an exchange the drain
	// ends keeps its slot until the instance must have finished, its
	// function's timeout plus HungGrace from its start, and the drain
	// waits for that (guard.go, Gateway.endAborted).
	KeepsInstances bool
}

// DefaultHungGrace is Config.HungGrace's default.
const DefaultHungGrace = 2 * time.Second

// Gateway is an http.Handler.
type Gateway struct {
	cfg Config
	// abort ends every exchange with an instance still going: Close. A
	// client going away does not end one (the slot follows the instance).
	abort     context.Context
	stopAbort context.CancelFunc
	// draining ends when the server begins to drain (beginDrain): the
	// exchanges whose clients have their answer (a 504) end then.
	draining   context.Context
	beginDrain context.CancelFunc

	d       *dispatch.Dispatcher
	mux     *http.ServeMux
	up      *upstream
	metrics *metrics
	ns      *namespaces
	asyncM  *async.Metrics
	store   *functionStore
	// nsStore and appStore keep the namespaces and apps the API created
	// (persist_more.go); nil without a state folder.
	nsStore  *recordDir
	appStore *recordDir
	secrets  *secrets.Store // nil without a state folder
	local    bool           // instances are local processes (instances.go)
	logs     *funclogs.Hub  // the instances' output (logs.go)
	// cluster and podLogs are a backend's own secrets and logs (the
	// Kubernetes backend's), nil for others (instances.go).
	cluster secretKeeper
	podLogs podLogReader
	// podFollowers counts the log streams read from the backend, bounded
	// like the local rings' followers.
	podFollowers atomic.Int64
	// streams ends the log streams read from a backend: EndStreams.
	streams    context.Context
	endStreams context.CancelFunc
	limits     *limits // the memory watchdog and its kills (limits.go)
	// held counts the slots of exchanges the drain ended that are kept
	// until their instance must have finished (KeepsInstances); letGo
	// ends the wait (a second signal).
	held      sync.WaitGroup
	letGo     chan struct{}
	letGoOnce sync.Once
}

// New builds the gateway's routes.
func New(cfg Config) *Gateway {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		// The Go runtime's and the process's own series too, as the
		// OpenFaaS gateway has: heap, GC, goroutines, CPU, resident memory.
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if cfg.Orchestration == "" {
		cfg.Orchestration = "local"
	}
	if cfg.HungGrace <= 0 {
		cfg.HungGrace = DefaultHungGrace
	}
	g := &Gateway{cfg: cfg, d: cfg.Dispatcher, mux: http.NewServeMux(), up: newUpstream(),
		metrics: newMetrics(cfg.Registry, cfg.Dispatcher), ns: newNamespaces(cfg.Dispatcher),
		store: newFunctionStore(cfg.State), nsStore: newRecordDir(cfg.State, statedir.Namespaces, MaxNamespaces),
		appStore: newRecordDir(cfg.State, statedir.Apps, stack.MaxFunctions), logs: funclogs.New(nil), limits: newLimits(cfg.Registry)}
	g.abort, g.stopAbort = context.WithCancel(context.Background())
	g.draining, g.beginDrain = context.WithCancel(context.Background())
	g.streams, g.endStreams = context.WithCancel(context.Background())
	g.letGo = make(chan struct{})
	if cfg.State != nil {
		var err error
		if g.secrets, err = secrets.Open(cfg.State); err != nil {
			cfg.Logger.Error("secrets are not served", "err", err)
		}
	}
	g.routes()
	return g
}

// Registry is where the gateway's metrics are, for other parts of the
// process to add theirs to the same /metrics.
func (g *Gateway) Registry() *prometheus.Registry { return g.cfg.Registry }

// Close ends the exchanges with instances still going (a client that
// left, an instance past its function's timeout), closes the idle
// connections and stops their janitor, the log streams and the memory
// watchdog. Call it once the server has stopped.
func (g *Gateway) Close() {
	g.beginDrain()
	g.stopAbort()
	g.endStreams()
	g.up.close()
	g.logs.Close()
	g.limits.close()
}

// EndStreams ends the streams that would otherwise last until their
// client goes (log followers), so that a drain does not wait for them.
func (g *Gateway) EndStreams() {
	g.logs.Close()
	g.endStreams()
}

func (g *Gateway) routes() {
	admin := func(h http.HandlerFunc) http.Handler { return g.cfg.Auth.wrap(h) }
	// The query parameters OpenFaaS's clients send on each route: any
	// other (a misspelt ?namesapce=dev) is refused, not ignored.
	nsOnly := func(h http.HandlerFunc) http.Handler { return admin(onlyParams(h, "namespace")) }
	none := func(h http.HandlerFunc) http.Handler { return admin(onlyParams(h)) }
	g.mux.Handle("GET /system/functions", nsOnly(g.listFunctions))
	g.mux.Handle("POST /system/functions", nsOnly(g.deployFunction))
	g.mux.Handle("PUT /system/functions", nsOnly(g.updateFunction))
	g.mux.Handle("DELETE /system/functions", nsOnly(g.deleteFunction))
	g.mux.Handle("GET /system/function/{name}", nsOnly(g.getFunction))
	g.mux.Handle("POST /system/scale-function/{name}", nsOnly(g.scaleFunction))
	g.mux.Handle("GET /system/apps", none(g.listApps))
	g.mux.Handle("POST /system/apps", none(g.deployApp))
	g.mux.Handle("GET /system/apps/{name}", none(g.getApp))
	g.mux.Handle("DELETE /system/apps/{name}", none(g.deleteApp))
	g.mux.Handle("GET /system/info", none(g.info))
	g.mux.Handle("GET /system/namespaces", none(g.listNamespaces))
	g.mux.Handle("GET /system/namespace/{name}", admin(g.getNamespace))
	g.mux.Handle("POST /system/namespace/{$}", admin(g.createNamespace))
	g.mux.Handle("POST /system/namespace/{name}", admin(g.createNamespace))
	g.mux.Handle("PUT /system/namespace/{name}", admin(g.updateNamespace))
	g.mux.Handle("DELETE /system/namespace/{name}", admin(g.deleteNamespace))
	g.mux.Handle("GET /system/logs", admin(g.functionLogs))
	g.mux.Handle("GET /system/secrets", nsOnly(g.secretsRoute(g.listSecrets)))
	g.mux.Handle("POST /system/secrets", nsOnly(g.secretsRoute(g.createSecret)))
	g.mux.Handle("PUT /system/secrets", nsOnly(g.secretsRoute(g.updateSecret)))
	g.mux.Handle("DELETE /system/secrets", nsOnly(g.secretsRoute(g.deleteSecret)))
	for pattern, h := range g.cfg.Routes {
		g.mux.Handle(pattern, admin(h.ServeHTTP))
	}
	g.mux.HandleFunc("/function/{name}", g.invokeFunction)
	g.mux.HandleFunc("/function/{name}/{path...}", g.invokeFunction)
	g.mux.HandleFunc("POST /app/{name}", g.invokeApp)
	g.asyncRoutes()
	g.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("OK\n"))
	})
	g.mux.Handle("GET /metrics", promhttp.HandlerFor(g.cfg.Registry, promhttp.HandlerOpts{}))
	// Whatever no route above serves gets a 404 or 405 that says so, never
	// Go's bare "404 page not found": a client learns what it asked for
	// that this gateway does not have (routes.go).
	g.mux.HandleFunc("/", g.noRoute)
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.mux.ServeHTTP(w, r) }
