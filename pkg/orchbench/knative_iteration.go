package orchbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

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

// iteration creates the Services at zero, runs the interference and,
// after the warm-up, the traffic for the rest of the iteration, waits for
// the scale-ups in flight, records them and deletes the Services.
func (k *knRun) iteration(ctx context.Context, w *knWorld, c Case, rep int) error {
	names := make([]string, k.opts.Services)
	hosts := make([]string, k.opts.Services)
	for i := range names {
		names[i] = fmt.Sprintf("i%d-svc-%02d", k.step+1, i+1)
		hosts[i] = k.hostOf(w.svcNS, names[i])
		w.tracker.watch(revisionOf(names[i]), i+1)
	}
	t0 := time.Now()
	if err := k.createServices(ctx, w, names); err != nil {
		return err
	}
	k.logf("   %s %s/%d rep %d: %d Knative Services Ready at zero in %.1f s", w.ctl, c.Mode, c.Burst, rep+1, len(names), time.Since(t0).Seconds())

	ictx, cancel := context.WithTimeout(ctx, k.opts.Iteration)
	defer cancel()
	tr := newTraffic(k.ingress, k.opts.KN.RequestTimeout)
	defer tr.close()
	var wg sync.WaitGroup
	churned := make(chan int, 1)
	start := time.Now()
	wg.Go(func() { churned <- k.churn(ctx, ictx, w.world, c, rep) })
	stopProgress := k.knProgress(ictx, w, c, rep, start, tr)
	if ctxtime.Sleep(ictx, k.opts.KN.Warmup) == nil {
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
	k.recordKnative(w, c, rep, tr)
	k.addChurn(w.ctl, c, objects, time.Since(start))
	k.step++
	sp, pc, pr := k.lastP50(w.ctl, c)
	sent, ok, failed := tr.snapshot()
	k.logf("[%d/%d] %s %s/%d rep %d: %d scale-ups, starts processing p50 %.0f ms, pods created p50 %.0f ms, pods ready p50 %.0f ms; %d requests, %d ok, %d failed, p50 %.0f ms; %d churn objects (%s elapsed)",
		k.step, k.totalSteps(), w.ctl, c.Mode, c.Burst, rep+1, k.lastTriggers, sp, pc, pr, sent, ok, failed, Summarize(tr.lat).P50,
		objects, time.Since(k.started).Round(time.Second))
	if tr.example != "" {
		k.logf("   first failed request: %s", firstLine(tr.example))
	}
	return k.deleteServices(ctx, w, names)
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
