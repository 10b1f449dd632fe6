package orchbench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/localcluster"
	"gantry.dev/gantry/pkg/rtclient"
	"gantry.dev/gantry/pkg/rtcontroller"
)

// Sample is one stage of one scale-up.
type Sample struct {
	Controller string  `json:"controller"`
	Mode       string  `json:"mode"`
	Burst      int     `json:"burst"`
	Rep        int     `json:"rep"`
	Service    int     `json:"service"`
	Stage      Stage   `json:"-"`
	Ms         float64 `json:"ms"`
}

// runner holds the clients and the per-run state.
type runner struct {
	opts    Options
	cfg     *rest.Config
	kube    kubernetes.Interface
	rts     *rtclient.Clients
	samples []Sample
	missed  map[missKey]int
	churned map[churnKey]*Churn
	patches map[churnKey][]float64
	started time.Time
	step    int
	// traces collects the in-process controller's reconcile traces;
	// parts holds their breakdown per controller and case.
	traces *traceStore
	parts  map[churnKey]map[string][]float64
	// churnRTT holds the interference's round trips (Knative runs).
	churnRTT map[churnKey]*churnCalls
}

type missKey struct {
	controller string
	c          Case
	stage      Stage
}

// Run runs the benchmark and returns every sample. A cancelled ctx (SIGINT)
// stops it promptly and returns what was measured with Interrupted set.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Knative {
		return runKnative(ctx, opts)
	}
	r := &runner{opts: opts, missed: map[missKey]int{}, churned: map[churnKey]*Churn{}, patches: map[churnKey][]float64{}, started: time.Now(),
		traces: newTraceStore(), parts: map[churnKey]map[string][]float64{}}
	for _, ctl := range opts.Controllers {
		if ctx.Err() != nil {
			break // interrupted: no control plane for the next controller
		}
		if err := r.runOn(ctx, ctl); err != nil {
			if ctx.Err() != nil {
				break
			}
			return nil, fmt.Errorf("%s: %w", ctl, err)
		}
	}
	rep := newReport(opts, r.samples, r.missed)
	rep.Churn = r.churnList()
	rep.PatchRTT = r.patchList()
	rep.Breakdown = r.breakdownList()
	rep.Interrupted = ctx.Err() != nil
	return rep, nil
}

// runOn runs one controller on a control plane of its own: on the local
// one, started for it. Sharing one, a controller inherited the last one's
// leftovers: the thousands of interfering Deployments, ReplicaSets and
// pods of a vanilla run were still being garbage-collected when the next
// controller started, and its first minutes ran at a third of the churn
// and four times the latency of the same controller on a fresh one. On a
// --kubeconfig cluster every controller connects to the same one.
func (r *runner) runOn(ctx context.Context, ctl string) error {
	stop, err := r.connect(ctx, ctl)
	if err != nil {
		return err
	}
	defer stop()
	return r.runController(ctx, ctl)
}

func (r *runner) logf(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, "orchestration: "+format+"\n", args...)
	}
}

// connect starts the local control plane (or loads --kubeconfig), builds the
// benchmark's own clients and installs the CRD. The returned func stops
// what connect started.
func (r *runner) connect(ctx context.Context, ctl string) (func(), error) {
	stop := func() {}
	if r.opts.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", r.opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig: %w", err)
		}
		r.cfg = cfg
	} else {
		c, err := localcluster.Start(ctx, localcluster.Options{
			Nodes: r.opts.Nodes, Scheduler: true, ControllerManager: true, Progress: r.opts.Progress,
		})
		if err != nil {
			return nil, err
		}
		// An interrupt stops the control plane at once, beside the run's
		// unwinding, which then meets closed connections instead of
		// waiting: the whole run stops within a second.
		unwatch := context.AfterFunc(ctx, func() { _ = c.Stop() })
		stop = func() {
			unwatch()
			r.logf("stopping the local control plane")
			_ = c.Stop()
		}
		r.cfg = c.RESTConfig()
	}
	if err := r.clients(); err != nil {
		stop()
		return nil, err
	}
	if isGantry(ctl) {
		if err := installCRD(ctx, r.cfg, r.opts.CRDPath); err != nil {
			stop()
			return nil, err
		}
		if err := installIdentity(ctx, r.cfg, r.opts.ConfigDir); err != nil {
			stop()
			return nil, fmt.Errorf("install the controller's RBAC and APF objects: %w", err)
		}
	}
	return stop, nil
}

// clients builds the driver's clients. The driver must never be what
// delays a scale-up, so its client-side rate limit is off.
func (r *runner) clients() error {
	cfg := rest.CopyConfig(r.cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "gantry-orchbench"
	var err error
	if r.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	scheme, err := rtclient.Scheme()
	if err != nil {
		return err
	}
	r.rts, err = rtclient.New(cfg, scheme)
	return err
}

// world is one controller's namespaces, objects and watches.
type world struct {
	ctl     string
	target  target
	tracker *tracker
	svcNS   string
	churnNS string
	gens    []int64 // each service's last generation
}

func serviceName(i int) string { return fmt.Sprintf("svc-%02d", i+1) }

// runController runs every case and repetition for one controller, with
// the Gantry controller running in-process for the Gantry variants.
func (r *runner) runController(ctx context.Context, ctl string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ctlDone chan error
	if ctl == GantryNoAPF {
		if err := removeAPF(ctx, r.cfg); err != nil {
			return err
		}
		defer func() {
			if err := installIdentity(context.WithoutCancel(ctx), r.cfg, r.opts.ConfigDir); err != nil {
				r.logf("reinstalling the APF objects: %v", err)
			}
		}()
	}
	if isGantry(ctl) {
		r.logf("%s: the controller's requests match FlowSchema %q", ctl, flowSchemaOf(ctx, r.cfg))
		ctlDone = r.startGantry(ctx, ctl)
	}
	w, err := r.setupWorld(ctx, ctl)
	if err == nil {
		for _, c := range r.opts.Cases {
			for rep := range r.opts.Repetitions {
				if err = r.iteration(ctx, w, c, rep); err != nil || ctx.Err() != nil {
					break
				}
			}
			if err != nil || ctx.Err() != nil {
				break
			}
		}
	}
	if w != nil {
		r.teardownWorld(ctx, w)
	}
	cancel()
	if ctlDone != nil {
		if cerr := <-ctlDone; cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = errors.Join(err, fmt.Errorf("gantry controller: %w", cerr))
		}
	}
	return err
}

// startGantry runs the controller as `gantry controller` would, watching
// every namespace so the interfering RTResources load it too.
func (r *runner) startGantry(ctx context.Context, ctl string) chan error {
	cfg := r.opts.controllerConfig(ctl)
	cfg.Options.Config = asController(r.cfg)
	cfg.Options.Trace = r.traces.add
	cfg.Options.Namespace = ""
	cfg.HTTPAddress = ""
	cfg.LeaderElect = false
	if cfg.Options.Logger == nil {
		cfg.Options.Logger = slog.New(slog.DiscardHandler)
	}
	done := make(chan error, 1)
	go func() { done <- rtcontroller.RunApp(ctx, cfg) }()
	return done
}

func (r *runner) setupWorld(ctx context.Context, ctl string) (*world, error) {
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1000000)
	w := &world{ctl: ctl, tracker: newTracker(),
		svcNS: "orchbench-" + ctl + "-" + suffix, churnNS: "orchbench-churn-" + ctl + "-" + suffix}
	w.target = r.targetFor(ctl, w.svcNS, w.churnNS)
	for _, ns := range []string{w.svcNS, w.churnNS} {
		if err := r.createNamespace(ctx, ns); err != nil {
			return w, err
		}
	}
	if err := r.startWatches(ctx, w); err != nil {
		return w, err
	}
	r.logf("%s: creating %d services in %s", ctl, r.opts.Services, w.svcNS)
	for i := range r.opts.Services {
		gen, err := w.target.createService(ctx, serviceName(i), int32(i+1))
		if err != nil {
			return w, fmt.Errorf("create service: %w", err)
		}
		w.gens = append(w.gens, gen)
	}
	return w, r.waitObserved(ctx, w)
}

// targetFor picks the objects a controller is measured on and the objects
// that interfere with it.
func (r *runner) targetFor(ctl, svcNS, churnNS string) target {
	deps := deployments{kube: r.kube, svcNS: svcNS, churnNS: churnNS}
	rts := rtresources{rts: r.rts, svcNS: svcNS, churnNS: churnNS}
	switch {
	case ctl == GantryDeploymentChurn:
		return deploymentChurn{rtresources: rts, churn: deps}
	case isGantry(ctl):
		return rts
	default:
		return deps
	}
}

func (r *runner) createNamespace(ctx context.Context, ns string) error {
	if _, err := r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	// The ServiceAccount admission plugin rejects pods until the
	// namespace's default service account exists.
	return poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := r.kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// startWatches runs the informers whose events time the stages.
func (r *runner) startWatches(ctx context.Context, w *world) error {
	f := informers.NewSharedInformerFactoryWithOptions(r.kube, 0, informers.WithNamespace(w.svcNS))
	pods := f.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: w.tracker.onPodAdd, UpdateFunc: w.tracker.onPodUpdate, DeleteFunc: w.tracker.onPodDelete,
	}); err != nil {
		return err
	}
	synced := []cache.InformerSynced{pods.HasSynced}
	if isGantry(w.ctl) {
		list := r.rts.Namespace(w.svcNS)
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return list.List(ctx, o)
			},
			WatchFuncWithContext: list.Watch,
		}, &gantryv1.RTResource{}, 0, cache.Indexers{})
		if _, err := inf.AddEventHandler(handlers(w.tracker.onRTResource)); err != nil {
			return err
		}
		go inf.RunWithContext(ctx)
		synced = append(synced, inf.HasSynced)
	} else {
		rs := f.Apps().V1().ReplicaSets().Informer()
		if _, err := rs.AddEventHandler(handlers(w.tracker.onReplicaSet)); err != nil {
			return err
		}
		synced = append(synced, rs.HasSynced)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	return nil
}

// waitObserved waits until the controller has reconciled every new
// service, so the first scale-up does not also time the controller's
// start-up.
func (r *runner) waitObserved(ctx context.Context, w *world) error {
	return poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		for i := range r.opts.Services {
			obs, err := r.observedGeneration(ctx, w, serviceName(i))
			if err != nil || obs < w.gens[i] {
				return false, nil
			}
		}
		return true, nil
	})
}

func (r *runner) observedGeneration(ctx context.Context, w *world, name string) (int64, error) {
	if isGantry(w.ctl) {
		rt, err := r.rts.Namespace(w.svcNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return rt.Status.ObservedGeneration, nil
	}
	d, err := r.kube.AppsV1().Deployments(w.svcNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return d.Status.ObservedGeneration, nil
}

// teardownWorld deletes the namespaces and waits, briefly, for them to go,
// so the next controller does not run beside their garbage collection.
func (r *runner) teardownWorld(ctx context.Context, w *world) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, ns := range []string{w.svcNS, w.churnNS} {
		_ = r.kube.CoreV1().Namespaces().Delete(bg, ns, metav1.DeleteOptions{})
	}
	if ctx.Err() != nil {
		return
	}
	_ = poll(ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
		for _, ns := range []string{w.svcNS, w.churnNS} {
			if _, err := r.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

func poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, cond)
}

// rngFor seeds one schedule. The controller is not part of the seed, so
// every controller meets the same scale-up gaps in the same case.
func (r *runner) rngFor(c Case, rep, service int) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d/%d", c.Mode, c.Burst, rep, service)
	return rand.New(rand.NewPCG(r.opts.Seed, h.Sum64()))
}

// sampleSink collects one iteration's samples from the service goroutines.
type sampleSink struct {
	parts   []map[string]float64 // Gantry: each scale-up's breakdown
	patch   []float64            // the scale patches' round trips, ms
	mu      sync.Mutex
	samples []Sample
	missed  [numStages]int
}

// addParts records one scale-up's breakdown.
func (r *runner) addParts(ctl string, c Case, parts []map[string]float64) {
	k := churnKey{ctl, c}
	if r.parts[k] == nil {
		r.parts[k] = map[string][]float64{}
	}
	for _, p := range parts {
		for name, v := range p {
			r.parts[k][name] = append(r.parts[k][name], v)
		}
	}
}

// breakdownList summarises the breakdowns in report order.
func (r *runner) breakdownList() []RunStats {
	out := []RunStats{}
	for _, c := range r.opts.Cases {
		for _, ctl := range r.opts.Controllers {
			parts, ok := r.parts[churnKey{ctl, c}]
			if !ok {
				continue
			}
			for _, name := range Components {
				if xs := parts[name]; len(xs) > 0 {
					out = append(out, RunStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst, Stage: name, Summary: Summarize(xs)})
				}
			}
		}
	}
	return out
}

// patchList summarises the scale patches' round trips in report order.
func (r *runner) patchList() []RunStats {
	out := []RunStats{}
	for _, c := range r.opts.Cases {
		for _, ctl := range r.opts.Controllers {
			if xs, ok := r.patches[churnKey{ctl, c}]; ok {
				out = append(out, RunStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst, Stage: "scale_patch_rtt", Summary: Summarize(xs)})
			}
		}
	}
	return out
}
