package orchbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/ctxtime"
	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/knativert"
)

// readyTimeout bounds the wait for an iteration's Services to get Ready
// and for the last iteration's pods to go.
const readyTimeout = 3 * time.Minute

// startKnWatches runs the informers whose events make the triggers and
// time the stages: pods; vanilla's Deployments and ReplicaSets; Gantry's
// RTResources.
func (k *knRun) startKnWatches(ctx context.Context, w *knWorld) error {
	f := informers.NewSharedInformerFactoryWithOptions(k.kube, 0, informers.WithNamespace(w.svcNS))
	t := w.tracker
	pods := f.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: t.onPod, UpdateFunc: func(_, obj any) { t.onPod(obj) }, DeleteFunc: t.onPodDelete,
	}); err != nil {
		return err
	}
	synced := []cache.InformerSynced{pods.HasSynced}
	if isGantry(w.ctl) {
		list := k.rts.Namespace(w.svcNS)
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return list.List(ctx, o)
			},
			WatchFuncWithContext: list.Watch,
		}, &gantryv1.RTResource{}, 0, cache.Indexers{})
		if _, err := inf.AddEventHandler(handlers(t.onTarget)); err != nil {
			return err
		}
		go inf.RunWithContext(ctx)
		synced = append(synced, inf.HasSynced)
	} else {
		deps := f.Apps().V1().Deployments().Informer()
		if _, err := deps.AddEventHandler(handlers(t.onTarget)); err != nil {
			return err
		}
		rs := f.Apps().V1().ReplicaSets().Informer()
		if _, err := rs.AddEventHandler(handlers(t.onReplicaSet)); err != nil {
			return err
		}
		synced = append(synced, deps.HasSynced, rs.HasSynced)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	return nil
}

// iteration brings the Services to zero (the arm's first iteration
// creates them at zero; later ones wait for the KPA to scale them there,
// as the paper's), runs the interference and, after the warm-up, the
// traffic for the rest of the iteration, waits for the scale-ups in
// flight and records them. With FreshServices every iteration creates
// new Services at zero and deletes them afterwards.
func (k *knRun) iteration(ctx context.Context, w *knWorld, c Case, rep int) error {
	names, err := k.servicesAtZero(ctx, w, c, rep)
	if err != nil {
		return err
	}
	hosts := make([]string, len(names))
	for i, name := range names {
		hosts[i] = k.hostOf(w.svcNS, name)
		w.tracker.watch(revisionOf(name), i+1)
	}

	ictx, cancel := context.WithTimeout(ctx, k.opts.Iteration)
	defer cancel()
	tr := newTraffic(k.ingress, k.opts.KN.RequestTimeout)
	defer tr.close()
	var wg sync.WaitGroup
	churned := make(chan int, 1)
	start := time.Now()
	calls := &churnCalls{}
	var pace churnPace
	kcmBefore, apiBefore := k.kcmScrape(ctx), k.apiserverScrape(ctx)
	wg.Go(func() {
		p := k.opts.knPacing(c)
		p.calls, p.pace = calls, &pace
		churned <- churnLoop(ctx, ictx, w.target, c, rep, p)
	})
	stopProgress := k.knProgress(ictx, w, c, rep, start, tr)
	if ctxtime.Sleep(ictx, trafficStart(k.opts.KN.Warmup, k.opts.knPacing(c).every(c), k.opts.KN.TrafficAtBurst, k.opts.KN.TrafficLead)) == nil {
		tr.run(ctx, ictx, hosts, k.opts.KN.Rate)
	}
	wg.Wait()
	stopProgress()
	objects := <-churned
	// Scale-ups the traffic caused may still be in flight.
	_ = poll(ctx, k.opts.StageTimeout, func(context.Context) (bool, error) { return w.tracker.pending() == 0, nil })
	if ctx.Err() != nil {
		return nil
	}
	k.recordKnative(w, c, rep, tr, start)
	k.addChurnPace(w.ctl, c, objects, pace)
	k.addKCM(w.ctl, c, kcmBefore, k.kcmScrape(ctx))
	k.addAPIServer(w.ctl, c, apiBefore, k.apiserverScrape(ctx))
	k.addChurnCalls(w.ctl, c, calls)
	k.step++
	sp, pc, pr := k.lastP50(w.ctl, c)
	sent, ok, failed := tr.snapshot()
	k.logf("[%d/%d] %s %s/%d rep %d: %d scale-ups, starts processing p50 %.0f ms, pods created p50 %.0f ms, pods ready p50 %.0f ms; %d requests, %d ok, %d failed, p50 %.0f ms; %d churn objects of %d due, %d of %d bursts late (%s elapsed)",
		k.step, k.totalSteps(), w.ctl, c.Mode, c.Burst, rep+1, k.lastTriggers, sp, pc, pr, sent, ok, failed, Summarize(tr.lat).P50,
		objects, pace.dueObjects, pace.late, pace.bursts, time.Since(k.started).Round(time.Second))
	if tr.example != "" {
		k.logf("   first failed request: %s", firstLine(tr.example))
	}
	if k.opts.KN.FreshServices {
		return k.deleteServices(ctx, w, names)
	}
	return nil
}

// servicesAtZero returns the iteration's Services, each at zero: no pod
// and its scale target at 0 replicas.
func (k *knRun) servicesAtZero(ctx context.Context, w *knWorld, c Case, rep int) ([]string, error) {
	t0 := time.Now()
	if k.opts.KN.FreshServices || w.services == nil {
		names := make([]string, k.opts.Services)
		for i := range names {
			names[i] = fmt.Sprintf("svc-%02d", i+1)
			if k.opts.KN.FreshServices {
				names[i] = fmt.Sprintf("i%d-svc-%02d", k.step+1, i+1)
			}
		}
		if err := k.createServices(ctx, w, names); err != nil {
			return nil, err
		}
		if !k.opts.KN.FreshServices {
			w.services = names
		}
		k.logf("   %s %s/%d rep %d: %d Knative Services created, Ready at zero in %.1f s", w.ctl, c.Mode, c.Burst, rep+1, len(names), time.Since(t0).Seconds())
		return names, nil
	}
	if err := k.waitZero(ctx, w, w.services); err != nil {
		return nil, err
	}
	k.logf("   %s %s/%d rep %d: the KPA scaled the %d Services to zero in %.1f s", w.ctl, c.Mode, c.Burst, rep+1, len(w.services), time.Since(t0).Seconds())
	return w.services, nil
}

// zeroTimeout bounds the wait for the KPA's scale to zero: by Knative's
// defaults a Revision goes 60 s (stable window) plus 30 s (grace period)
// after its last request, and its pods drain for up to their timeout.
const zeroTimeout = 5 * time.Minute

// waitZero waits until the KPA has scaled every Service to zero: each
// revision's scale target wants 0 replicas and no pod of it is left.
func (k *knRun) waitZero(ctx context.Context, w *knWorld, names []string) error {
	sel := knativert.RevisionLabel + " in (" + strings.Join(revisions(names), ",") + ")"
	var last string
	err := poll(ctx, zeroTimeout, func(ctx context.Context) (bool, error) {
		want, err := k.targetReplicas(ctx, w, sel)
		if err != nil || want > 0 {
			last = fmt.Sprintf("scale targets want %d replicas", want)
			return false, nil
		}
		pods, err := k.kube.CoreV1().Pods(w.svcNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		if n := running(pods.Items); n > 0 {
			last = fmt.Sprintf("%d pods left", n)
			return false, nil
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("the KPA did not scale the Services to zero within %v: %s", zeroTimeout, last)
	}
	return ctx.Err()
}

// targetReplicas sums the spec.replicas of the scale targets of sel: the
// revisions' Deployments (vanilla) or RTResources (Gantry).
func (k *knRun) targetReplicas(ctx context.Context, w *knWorld, sel string) (int32, error) {
	opts := metav1.ListOptions{LabelSelector: sel}
	var sum int32
	if isGantry(w.ctl) {
		rts, err := k.rts.Namespace(w.svcNS).List(ctx, opts)
		if err != nil {
			return 0, err
		}
		for _, rt := range rts.Items {
			if rt.Spec.Replicas != nil {
				sum += *rt.Spec.Replicas
			}
		}
		return sum, nil
	}
	deps, err := k.kube.AppsV1().Deployments(w.svcNS).List(ctx, opts)
	if err != nil {
		return 0, err
	}
	for _, d := range deps.Items {
		if d.Spec.Replicas != nil {
			sum += *d.Spec.Replicas
		}
	}
	return sum, nil
}

// knService is one Knative Service of the run: at zero until traffic
// comes, containerConcurrency and criticality as the paper's.
func (k *knRun) knService(ns, name string, criticality int) *unstructured.Unstructured {
	ann := map[string]any{
		"autoscaling.knative.dev/initial-scale": "0",
		gantryv1.CriticalityAnnotation:          strconv.Itoa(criticality),
	}
	if k.opts.KN.MaxScale > 0 {
		ann["autoscaling.knative.dev/max-scale"] = strconv.Itoa(k.opts.KN.MaxScale)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.knative.dev/v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": name, "namespace": ns, "labels": map[string]any{serviceLabel: name}},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"annotations": ann},
			"spec": map[string]any{
				"containerConcurrency": int64(k.opts.KN.ContainerConcurrency),
				"containers":           []any{map[string]any{"image": "dev.local/gantry-fn:" + k.opts.KN.Function}},
			},
		}},
	}}
}

// createServices creates the Services and waits until each is Ready.
// Knative's webhook refuses initial-scale 0 until it has read the
// config-autoscaler change, so a refusal naming it is retried.
func (k *knRun) createServices(ctx context.Context, w *knWorld, names []string) error {
	api := k.dyn.Resource(knativeinstall.KnativeServiceGVR).Namespace(w.svcNS)
	for i, name := range names {
		err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			_, err := api.Create(ctx, k.knService(w.svcNS, name, i+1), metav1.CreateOptions{})
			if err != nil && strings.Contains(err.Error(), "initial-scale") {
				return false, nil
			}
			return true, err
		})
		if err != nil {
			return fmt.Errorf("create Knative Service %s: %w", name, err)
		}
	}
	var last string
	err := poll(ctx, readyTimeout, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			u, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if s := readyStatus(u); s != "True" {
				last = fmt.Sprintf("%s Ready=%q: %v", name, s, u.Object["status"])
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("Knative Services not Ready within %v: %s", readyTimeout, last)
	}
	return nil
}

func readyStatus(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// deleteServices deletes the iteration's Services and waits until their
// pods are gone, so the next iteration starts on an idle node. Knative's
// pods drain for up to their revision timeout; once nothing would
// recreate them (their Deployment or RTResource is gone) they are deleted
// at once.
func (k *knRun) deleteServices(ctx context.Context, w *knWorld, names []string) error {
	api := k.dyn.Resource(knativeinstall.KnativeServiceGVR).Namespace(w.svcNS)
	for _, name := range names {
		if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && ctx.Err() == nil {
			return fmt.Errorf("delete Knative Service %s: %w", name, err)
		}
	}
	sel := knativert.RevisionLabel + " in (" + strings.Join(revisions(names), ",") + ")"
	zero := int64(0)
	err := poll(ctx, readyTimeout, func(ctx context.Context) (bool, error) {
		owners, err := k.ownersLeft(ctx, w, sel)
		if err != nil || owners > 0 {
			return false, nil
		}
		pods, err := k.kube.CoreV1().Pods(w.svcNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		if len(pods.Items) == 0 {
			return true, nil
		}
		_ = k.kube.CoreV1().Pods(w.svcNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: sel})
		return false, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("the Services' pods were not gone within %v", readyTimeout)
	}
	return nil
}

func revisions(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = revisionOf(n)
	}
	return out
}

// ownersLeft counts the Deployments, ReplicaSets and RTResources of sel
// left in the namespace.
func (k *knRun) ownersLeft(ctx context.Context, w *knWorld, sel string) (int, error) {
	opts := metav1.ListOptions{LabelSelector: sel}
	deps, err := k.kube.AppsV1().Deployments(w.svcNS).List(ctx, opts)
	if err != nil {
		return 0, err
	}
	rss, err := k.kube.AppsV1().ReplicaSets(w.svcNS).List(ctx, opts)
	if err != nil {
		return 0, err
	}
	n := len(deps.Items) + len(rss.Items)
	if isGantry(w.ctl) {
		rts, err := k.rts.Namespace(w.svcNS).List(ctx, opts)
		if err != nil {
			return 0, err
		}
		n += len(rts.Items)
	}
	return n, nil
}

// knProgress prints a line every progressEvery while an iteration runs.
func (k *knRun) knProgress(ctx context.Context, w *knWorld, c Case, rep int, start time.Time, tr *traffic) func() {
	if k.opts.Progress == nil {
		return func() {}
	}
	return everyTick(ctx, func() {
		sent, ok, failed := tr.snapshot()
		k.logf("   %s %s/%d rep %d: %.0f of %.0f s, %d scale-ups, %d requests sent, %d ok, %d failed",
			w.ctl, c.Mode, c.Burst, rep+1, time.Since(start).Seconds(), k.opts.Iteration.Seconds(),
			w.tracker.count(), sent, ok, failed)
	})
}

// churnRate is the continuous mode's rate, the same for both arms:
// --churn-rate objects/s if given, else a burst every ContinuousPeriod
// (Burst/period objects/s), else 0 (back to back, unequal arms).
func (o Options) churnRate(c Case) float64 {
	switch {
	case o.ChurnRate > 0:
		return o.ChurnRate
	case o.KN.ContinuousPeriod > 0:
		return float64(c.Burst) / o.KN.ContinuousPeriod.Seconds()
	}
	return 0
}

// knPacing is a Knative case's interference schedule, the same in both
// arms.
func (o Options) knPacing(c Case) pacing {
	return pacing{period: o.IntervalPeriod, rate: o.churnRate(c)}
}

// running counts the pods whose containers may still run: a pod that
// ended (Succeeded or Failed, as a scaled-down Knative pod does once
// queue-proxy drained) waits only for its grace period to pass before its
// object goes, and takes no CPU meanwhile.
func running(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}
