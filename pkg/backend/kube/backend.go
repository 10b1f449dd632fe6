package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

// CloseAction says what Close does to the cluster objects.
type CloseAction int

const (
	// CloseScaleToZero scales every function to 0 and keeps its objects,
	// so Close stops every instance (as Backend.Close promises) and the
	// next gateway finds the functions where it left them.
	CloseScaleToZero CloseAction = iota
	// CloseKeep leaves the objects and their replicas as they are; a
	// restarted gateway adopts the ready pods as spares.
	CloseKeep
	// CloseDelete deletes each function's workload and Service.
	CloseDelete
)

// Options configures the Kubernetes backend. The zero value works.
type Options struct {
	// Port is the container port instances listen on, passed as $PORT
	// (default 8080).
	Port int32
	// ReadyTimeout bounds a start: a start no new ready endpoint answers
	// within it fails (default 5 minutes, room for an image pull).
	ReadyTimeout time.Duration
	// StopGrace is how long a stopped instance's endpoint may stay
	// routable before its pod is deleted outright (default 2 minutes).
	// It matters for Deployments, whose controller may pick another pod
	// if it had not yet seen the deletion cost.
	StopGrace time.Duration
	// Workers is how many functions' API calls run at once (default 4);
	// one function's calls are always serialised.
	Workers int
	// Resync is the EndpointSlice informer's resync period (default 10m).
	Resync time.Duration
	// OnClose is what Close does to the cluster objects once the backend
	// leads; a follower's Close leaves them to the replicas still serving.
	OnClose CloseAction
	// Follow starts the backend as a follower, for a replica of a
	// scaled-out gateway that has not been elected: it writes nothing to
	// the cluster and reports every routable endpoint as an instance,
	// until Lead.
	Follow bool
	// NodeSelector, when set, is every function pod's nodeSelector: for
	// a cluster whose nodes cannot all serve, such as process nodes
	// (type=process) beside kwok's.
	NodeSelector map[string]string
	// Sweep is how often pending starts and stopped instances are checked
	// against their deadlines (default 1 s, or ReadyTimeout/4 if shorter).
	Sweep  time.Duration
	Logger *slog.Logger
	// Clock defaults to the real clock.
	Clock clock.WithTicker
}

func (o Options) withDefaults() Options {
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 2 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Resync <= 0 {
		o.Resync = 10 * time.Minute
	}
	if o.Sweep <= 0 {
		o.Sweep = min(time.Second, o.ReadyTimeout/4)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// apiTimeout bounds one API call a worker makes, so a hung connection
// delays a function's scaling, never stalls it.
const apiTimeout = 30 * time.Second

// Backend runs each function as an RTResource (or a Deployment) with a
// headless Service, in one namespace. The dispatcher's decisions become
// replica counts written through /scale; readiness and addresses come back
// from the Service's EndpointSlices.
type Backend struct {
	opts  Options
	ns    string
	kube  kubernetes.Interface
	kinds map[string]workload

	out     *eventQueue
	queue   workqueue.TypedRateLimitingInterface[string]
	factory informers.SharedInformerFactory
	slices  cache.SharedIndexInformer
	// podFactory and pods watch the function pods, for the reason a
	// start will not become ready (podfail.go).
	podFactory informers.SharedInformerFactory
	pods       cache.SharedIndexInformer

	ctx     context.Context // cancelled by Close: aborts the workers' calls
	cancel  context.CancelFunc
	stop    chan struct{} // closed by Close: stops the informer and the sweeper
	workers sync.WaitGroup

	// declMu keeps the declarations still while Lead writes them: Deploy
	// and Undeploy hold it shared, Lead exclusively, so no function is
	// registered, changed or forgotten between Lead's snapshot and its
	// switch. It is taken before mu, never under it.
	declMu sync.RWMutex

	mu     sync.Mutex // guards fns, closed, follow and subs
	fns    map[string]*fnState
	closed bool
	follow bool

	// cfg makes the backends of other function namespaces (subs, by
	// function namespace; namespaces.go), whose parent is this one.
	cfg    *rest.Config
	subs   map[string]*Backend
	parent *Backend
}

var _ backend.Backend = (*Backend)(nil)

// New connects to the cluster cfg describes and runs functions in
// namespace, which must exist.
func New(cfg *rest.Config, namespace string, opts Options) (*Backend, error) {
	if namespace == "" {
		return nil, fmt.Errorf("%w: the kubernetes backend needs a namespace", stack.ErrInvalid)
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		// client-go's default of 5 qps would make a burst of scale-ups
		// wait on the client, not the cluster.
		cfg.QPS, cfg.Burst = 50, 100
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rt, err := newRTWorkload(cfg, kube, namespace)
	if err != nil {
		return nil, err
	}
	rt.nodeSelector = opts.NodeSelector
	kinds := map[string]workload{
		stack.KindRTResource: rt,
		stack.KindDeployment: &deploymentWorkload{kube: kube, ns: namespace, nodeSelector: opts.NodeSelector},
	}
	b, err := newBackend(kube, kinds, namespace, opts)
	if err != nil {
		return nil, err
	}
	b.cfg = cfg
	return b, nil
}

// newBackend starts the EndpointSlice informer, the workers and the
// sweeper. Tests pass their own workloads.
func newBackend(kube kubernetes.Interface, kinds map[string]workload, namespace string, opts Options) (*Backend, error) {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	b := &Backend{opts: opts, ns: namespace, kube: kube, kinds: kinds, out: newEventQueue(),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second)),
		ctx: ctx, cancel: cancel, stop: make(chan struct{}), fns: map[string]*fnState{}, follow: opts.Follow,
		subs: map[string]*Backend{}}
	if err := errors.Join(b.watchSlices(), b.watchPods()); err != nil {
		cancel()
		b.queue.ShutDown()
		b.out.close()
		return nil, err
	}
	for range opts.Workers {
		b.workers.Add(1)
		go b.work()
	}
	b.workers.Add(1)
	go b.sweeper()
	return b, nil
}

// watchSlices starts an informer on the namespace's EndpointSlices that
// belong to a Service (the only ones that can be a function's).
func (b *Backend) watchSlices() error {
	b.factory = informers.NewSharedInformerFactoryWithOptions(b.kube, b.opts.Resync,
		informers.WithNamespace(b.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelServiceName }))
	b.slices = b.factory.Discovery().V1().EndpointSlices().Informer()
	if err := b.slices.AddIndexers(cache.Indexers{serviceIndex: indexByService}); err != nil {
		return err
	}
	refresh := func(obj any) { b.refresh(serviceOf(obj)) }
	_, err := b.slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    refresh,
		UpdateFunc: func(_, obj any) { refresh(obj) },
		DeleteFunc: refresh,
	})
	if err != nil {
		return err
	}
	b.factory.Start(b.stop)
	return nil
}

// Attach sets where events go.
func (b *Backend) Attach(ev backend.Events) { b.out.attach(ev) }

// Deploy creates or updates the function's Service and workload. A new
// workload starts at f.MinScale replicas, a head start on the starts the
// dispatcher is about to ask for; an existing one keeps its count until
// the worker, woken at the end, writes the backend's.
//
// A follower writes nothing: the leader owns the objects, and Lead writes
// them should this replica take over. It only registers the function, so
// that its endpoints are observed.
func (b *Backend) Deploy(ctx context.Context, f stack.Function) error {
	kind, err := kindOf(f)
	if err != nil {
		return err
	}
	if sub, _, err := b.route(ctx, f.Ref(), true); err != nil || sub != nil {
		if err != nil {
			return err
		}
		// The namespace's backend runs f as a function of its default.
		f.Namespace = ""
		return sub.Deploy(ctx, f)
	}
	if err := refusal(f, b.ns); err != nil {
		return err
	}
	b.declMu.RLock()
	defer b.declMu.RUnlock()
	if err := b.waitSynced(ctx); err != nil {
		return fmt.Errorf("deploy %s: %w", f.Name, err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	if b.follow {
		b.registerLocked(f)
		b.mu.Unlock()
		return nil
	}
	replicas := int32(f.MinScale)
	if st, known := b.fns[f.Name]; known {
		replicas = int32(max(st.live(), f.MinScale))
	}
	b.mu.Unlock()
	if err := b.applyObjects(ctx, f, kind, replicas); err != nil {
		return err
	}
	b.register(f)
	return nil
}

// syncTimeout bounds the wait for the EndpointSlice cache: without it, a
// service account that may not watch EndpointSlices would hang the
// gateway's start-up instead of failing it.
const syncTimeout = time.Minute

func (b *Backend) waitSynced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), b.slices.HasSynced) {
		return fmt.Errorf("the EndpointSlice cache of namespace %s did not sync (may this identity list and watch endpointslices.discovery.k8s.io?): %w",
			b.ns, ctx.Err())
	}
	return nil
}

// kindOf checks what the Kubernetes backend needs beyond a valid
// declaration: an image to run.
func kindOf(f stack.Function) (string, error) {
	if f.Image == "" {
		return "", fmt.Errorf("%w: function %q has no image; the kubernetes backend runs images, not local commands", stack.ErrInvalid, f.Name)
	}
	switch f.Kind {
	case "", stack.KindRTResource:
		return stack.KindRTResource, nil
	case stack.KindDeployment:
		return stack.KindDeployment, nil
	}
	return "", fmt.Errorf("%w: function %q: kind %q", stack.ErrInvalid, f.Name, f.Kind)
}

// applyObjects writes the Service and the workload, and removes a workload
// of the other kind left from an earlier declaration of the function.
func (b *Backend) applyObjects(ctx context.Context, f stack.Function, kind string, replicas int32) error {
	created, err := b.applyService(ctx, f)
	if err != nil {
		return fmt.Errorf("deploy %s: service: %w", f.Name, err)
	}
	if err := b.kinds[kind].apply(ctx, f, b.opts.Port, replicas); err != nil {
		if created {
			// A failed deploy registers nothing, so nothing would ever
			// delete a Service it left behind.
			_ = b.deleteService(ctx, f.Name)
		}
		return fmt.Errorf("deploy %s: %s: %w", f.Name, kind, err)
	}
	for other, w := range b.kinds {
		if other == kind {
			continue
		}
		if err := w.remove(ctx, f.Name); err != nil {
			return fmt.Errorf("deploy %s: remove the old %s: %w", f.Name, other, err)
		}
	}
	return nil
}

// applyService creates or updates the function's Service and reports
// whether it created it.
func (b *Backend) applyService(ctx context.Context, f stack.Function) (bool, error) {
	want := newService(f, b.ns, b.opts.Port)
	svcs := b.kube.CoreV1().Services(b.ns)
	cur, err := svcs.Get(ctx, f.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = svcs.Create(ctx, want, metav1.CreateOptions{})
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	if !isManaged(cur) {
		return false, errUnmanaged("Service", b.ns, f.Name)
	}
	mergeMeta(&cur.ObjectMeta, want.ObjectMeta)
	cur.Spec.Selector, cur.Spec.Ports = want.Spec.Selector, want.Spec.Ports
	_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
	return false, err
}

// register records the declaration and wakes the worker, since apply
// kept an existing object's count: a restarted gateway's surplus pods go,
// and the rest are spares. A new function starts from the endpoints
// already there.
func (b *Backend) register(f stack.Function) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.registerLocked(f)
}

func (b *Backend) registerLocked(f stack.Function) {
	if b.closed {
		return
	}
	now := b.opts.Clock.Now()
	st, ok := b.fns[f.Name]
	if !ok {
		st = newFnState(f)
		st.follow = b.follow
		b.fns[f.Name] = st
		b.out.push(st.observe(b.viewLocked(f.Name), now)...)
	}
	st.decl = f
	b.queue.Add(f.Name)
}

// Undeploy forgets the function, failing its pending starts and ending
// its instances, and deletes its workload and Service. A follower deletes
// nothing: the objects are the leader's to remove.
func (b *Backend) Undeploy(ctx context.Context, name string) error {
	if sub, n, err := b.route(ctx, name, false); err != nil || sub != nil {
		if err != nil {
			return err
		}
		return sub.Undeploy(ctx, n)
	}
	b.declMu.RLock()
	defer b.declMu.RUnlock()
	b.mu.Lock()
	st, ok := b.fns[name]
	if ok {
		delete(b.fns, name)
		b.out.push(st.forget(fmt.Errorf("%w: %q", backend.ErrNotDeployed, name))...)
	}
	follow := b.follow
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", backend.ErrNotDeployed, name)
	}
	if follow {
		return nil
	}
	return b.deleteObjects(ctx, name)
}

// Lead makes a following backend lead, for the replica just elected: it
// writes every registered function's Service and workload as Deploy
// would, then wakes each function's worker to write its replica count.
// The instances adopted while following stay reported and are counted, so
// the first count written keeps the pods that are serving; from then on
// the backend behaves as one created without Follow. Lead on a backend
// that already leads does nothing. If a write fails, the backend still
// follows, and Lead may be called again: switching with some objects
// unwritten would have the workers scale objects that may not exist.
func (b *Backend) Lead(ctx context.Context) error {
	if err := b.lead(ctx); err != nil {
		return err
	}
	for _, sub := range b.subsOf() {
		if err := sub.lead(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) lead(ctx context.Context) error {
	b.declMu.Lock()
	defer b.declMu.Unlock()
	type apply struct {
		f        stack.Function
		replicas int32
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	if !b.follow {
		b.mu.Unlock()
		return nil
	}
	todo := make([]apply, 0, len(b.fns))
	for _, name := range sortedKeys(b.fns) {
		st := b.fns[name]
		todo = append(todo, apply{f: st.decl, replicas: st.target()})
	}
	b.mu.Unlock()

	// Close cancels b.ctx: a Lead it overtakes must stop writing rather
	// than recreate or rescale what Close has just left alone.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)()
	for _, a := range todo {
		kind, err := kindOf(a.f)
		if err != nil {
			return fmt.Errorf("lead: %w", err)
		}
		if err := b.applyObjects(ctx, a.f, kind, a.replicas); err != nil {
			return fmt.Errorf("lead: %w", err)
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	b.follow = false
	for name, st := range b.fns {
		st.lead()
		b.queue.Add(name)
	}
	return nil
}

func (b *Backend) deleteObjects(ctx context.Context, name string) error {
	var errs []error
	for kind, w := range b.kinds {
		if err := w.remove(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", kind, name, err))
		}
	}
	if err := b.deleteService(ctx, name); err != nil {
		errs = append(errs, fmt.Errorf("delete service %s: %w", name, err))
	}
	return errors.Join(errs...)
}

func (b *Backend) deleteService(ctx context.Context, name string) error {
	svcs := b.kube.CoreV1().Services(b.ns)
	cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !isManaged(cur):
		return nil
	}
	err = svcs.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Start asks for n more instances. It only books them and wakes the
// function's worker: the dispatcher calls it under its lock, so it must
// neither block on the API nor deliver events itself. A follower fails
// each start with ErrFollower.
func (b *Backend) Start(function string, n int) {
	if n <= 0 {
		return
	}
	if sub, name, err := b.route(context.Background(), function, false); err != nil || sub != nil {
		if err != nil {
			for range n {
				b.out.push(event{kind: evFailed, function: function, err: err})
			}
			return
		}
		sub.Start(name, n)
		return
	}
	now := b.opts.Clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.fns[function]
	if b.closed || !ok {
		err := ErrClosed
		if !ok {
			err = fmt.Errorf("%w: %q", backend.ErrNotDeployed, function)
		}
		for range n {
			b.out.push(event{kind: evFailed, function: function, err: err})
		}
		return
	}
	b.out.push(st.start(n, now)...)
	b.queue.Add(function)
}

// Stop takes an instance out: its pod is retired and the replica count
// lowered by the function's worker; Exited follows when its endpoint goes.
// A follower ignores it (see fnState.stop): the leader decides which pods
// go, and the instance's Exited still follows when one does.
func (b *Backend) Stop(inst backend.Instance) {
	if sub, name, _ := b.route(context.Background(), inst.Function, false); sub != nil {
		inst.Function = name
		sub.Stop(inst)
		return
	}
	now := b.opts.Clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.fns[inst.Function]
	if b.closed || !ok {
		return
	}
	if st.stop(inst, now) {
		b.queue.Add(inst.Function)
	}
}

// refresh recomputes a Service's routable endpoints after a slice changed.
func (b *Backend) refresh(service string) {
	if service == "" {
		return
	}
	now := b.opts.Clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.fns[service]
	if b.closed || !ok {
		return
	}
	before := st.target()
	b.out.push(st.observe(b.viewLocked(service), now)...)
	if st.target() != before {
		b.queue.Add(service) // an instance left on its own: stop paying for it
	}
}

func (b *Backend) viewLocked(service string) map[string]string {
	return viewOf(cachedSlices(b.slices.GetIndexer(), service), b.opts.Port)
}

// sweeper checks deadlines every Sweep until Close.
func (b *Backend) sweeper() {
	defer b.workers.Done()
	t := b.opts.Clock.NewTicker(b.opts.Sweep)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C():
			b.sweep(now)
		}
	}
}

// sweep fails the starts past the ready timeout and queues the forced
// deletion of stopped pods past the stop grace.
func (b *Backend) sweep(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for name, st := range b.fns {
		evs := st.expire(now.Add(-b.opts.ReadyTimeout), b.opts.ReadyTimeout)
		b.out.push(evs...)
		// A probe started while a pod already sits in a back-off sees
		// no pod update for minutes: the sweep checks it.
		b.checkPodsLocked(name, st)
		if st.overdue(now, b.opts.StopGrace) || len(evs) > 0 {
			b.queue.Add(name)
		}
	}
}

// Close ends the backend: pending starts fail, instances are reported
// exited, the workers and the informer stop, and the cluster objects are
// treated as OnClose says, all bounded by ctx. A follower leaves the
// objects as they are whatever OnClose says: the other replicas still
// serve from them.
func (b *Backend) Close(ctx context.Context) error {
	var subErrs []error
	for _, sub := range b.subsOf() {
		subErrs = append(subErrs, sub.Close(ctx))
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errors.Join(subErrs...)
	}
	b.closed = true
	names := make([]string, 0, len(b.fns))
	for _, name := range sortedKeys(b.fns) {
		if !b.follow {
			names = append(names, name)
		}
		b.out.push(b.fns[name].forget(ErrClosed)...)
	}
	kinds := map[string]workload{}
	for name, st := range b.fns {
		kinds[name] = b.kinds[kindOrDefault(st.decl.Kind)]
	}
	b.mu.Unlock()

	b.queue.ShutDown()
	b.cancel()
	close(b.stop)
	errs := append(subErrs, waitCtx(ctx, &b.workers))
	errs = append(errs, b.closeObjects(ctx, names, kinds)...)
	b.factory.Shutdown()
	if b.podFactory != nil {
		b.podFactory.Shutdown()
	}
	b.out.close()
	select {
	case <-b.out.done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("delivering the last events: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

func kindOrDefault(kind string) string {
	if kind == "" {
		return stack.KindRTResource
	}
	return kind
}

func (b *Backend) closeObjects(ctx context.Context, names []string, kinds map[string]workload) []error {
	var errs []error
	for _, name := range names {
		var err error
		switch b.opts.OnClose {
		case CloseScaleToZero:
			err = kinds[name].scale(ctx, name, 0)
			if apierrors.IsNotFound(err) {
				err = nil
			}
		case CloseDelete:
			err = b.deleteObjects(ctx, name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", name, err))
		}
	}
	return errs
}

// waitCtx waits for wg, or for ctx.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the workers: %w", ctx.Err())
	}
}
