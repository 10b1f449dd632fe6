package orchbench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The floor is how fast a controller that only watches and writes once
// starts processing a scale-up on this machine under a case's load: a
// responder that does nothing but
// see the KPA's trigger (the tracker's own detection, from the same watch
// event) and answer it with one cheap write, a merge patch of an
// annotation on a ConfigMap of the Services' namespace. Both arms run the
// same responder with the same client and the same write, and the audit
// log times it as it times the stages: from the completion of the KPA's
// /scale write to the reception of the responder's patch. It is not a
// strict bound: it watches from the benchmark's process, which also
// drives the traffic, so a controller whose watch delivers sooner can
// beat it (Gantry's did in interval:20, docs/knative.md); the watch's
// delivery itself (audit_parts' trigger_to_watch) is in every
// controller's starts processing.

// floorAnnotation carries the trigger a floor write answers,
// "<scale target>/<generation>", so the audit log joins the two.
const floorAnnotation = "orchbench.gantry.dev/floor"

// floorConfigMap is the probe ConfigMap of Service i (1..N): one each, so
// that two Services' answers do not contend for one object.
func floorConfigMap(service int) string { return fmt.Sprintf("orchbench-floor-%02d", service) }

// floorKey is the annotation's value for a trigger.
func floorKey(target string, gen int64) string { return fmt.Sprintf("%s/%d", target, gen) }

// floorQueue bounds the triggers waiting for the responder; a trigger
// that finds it full is counted (floorResponder.dropped), not answered.
const floorQueue = 256

// floorMark is one trigger for the responder.
type floorMark struct {
	service int
	key     string
}

// floorResponder answers every trigger with one patch, each in a
// goroutine of its own so that a slow write does not hold the next.
type floorResponder struct {
	kube    kubernetes.Interface
	ns      string
	marks   chan floorMark
	mu      sync.Mutex
	dropped int
	failed  int
	wg      sync.WaitGroup
}

// newFloorResponder makes the probe ConfigMaps of services Services in ns
// with a client of its own (unthrottled, as the benchmark's).
func newFloorResponder(ctx context.Context, cfg *rest.Config, ns string, services int) (*floorResponder, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	c.UserAgent = "gantry-orchbench-floor"
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= services; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: floorConfigMap(i), Namespace: ns}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the floor's probe ConfigMap: %w", err)
		}
	}
	return &floorResponder{kube: kube, ns: ns, marks: make(chan floorMark, floorQueue)}, nil
}

// offer hands a trigger to the responder without blocking the watch.
func (f *floorResponder) offer(service int, target string, gen int64) {
	select {
	case f.marks <- floorMark{service: service, key: floorKey(target, gen)}:
	default:
		f.mu.Lock()
		f.dropped++
		f.mu.Unlock()
	}
}

// run answers the triggers until ctx ends, then waits for the writes in
// flight.
func (f *floorResponder) run(ctx context.Context) {
	defer f.wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-f.marks:
			f.wg.Go(func() { f.answer(ctx, m) })
		}
	}
}

func (f *floorResponder) answer(ctx context.Context, m floorMark) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{floorAnnotation: m.key}}})
	if _, err := f.kube.CoreV1().ConfigMaps(f.ns).Patch(ctx, floorConfigMap(m.service), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
		f.mu.Lock()
		f.failed++
		f.mu.Unlock()
	}
}

// takeCounts returns and resets the triggers dropped and the writes that
// failed.
func (f *floorResponder) takeCounts() (dropped, failed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dropped, failed = f.dropped, f.failed
	f.dropped, f.failed = 0, 0
	return dropped, failed
}

// auditFloor times one trigger's floor in the audit log: from the
// completion of the KPA's /scale write to the reception of the
// responder's patch answering it; false if either is not in the log.
func auditFloor(events []auditEvent, t *knTrigger) (float64, bool) {
	scale := triggerEvent(events, t)
	if scale == nil {
		return 0, false
	}
	key := floorKey(t.target, t.gen)
	for i := range events {
		e := &events[i]
		if e.ObjectRef.Resource == "configmaps" && e.Verb == "patch" && e.RequestObject != nil &&
			e.RequestObject.Metadata.Annotations[floorAnnotation] == key {
			return max(0, float64(e.Received.Sub(scale.Done.Time))/float64(time.Millisecond)), true
		}
	}
	return 0, false
}

// FloorStats is one arm's floor in one case (knative_floor.go): trigger
// to the responder's write, on the API server's clock.
type FloorStats struct {
	Controller string  `json:"controller"`
	Mode       string  `json:"mode"`
	Burst      int     `json:"burst"`
	N          int     `json:"n"`
	P50        float64 `json:"p50_ms"`
	P90        float64 `json:"p90_ms"`
	// Missed triggers had no floor write in the audit log; Dropped found
	// the responder's queue full; Failed writes were refused.
	Missed  int `json:"missed"`
	Dropped int `json:"dropped"`
	Failed  int `json:"failed"`
	// VanillaStartsProcessingMs is vanilla's audit-log starts processing
	// median in the case, and AllowedReduction 1 - P50/that: the most any
	// controller could reduce vanilla's median by under this arm's load
	// (nil without vanilla's median).
	VanillaStartsProcessingMs float64  `json:"vanilla_starts_processing_p50_ms"`
	AllowedReduction          *float64 `json:"allowed_reduction"`
	// RequestShare and TimeShare are the floor's cost: its ConfigMap
	// patches' share of the API server's requests (watches aside) and of
	// their time over the case (apiserver_request_duration_seconds).
	RequestShare float64 `json:"apiserver_request_share"`
	TimeShare    float64 `json:"apiserver_time_share"`
}

// floorCost is the ConfigMap patches' share of the requests and of their
// time among the API server's request durations (watches and connects
// aside) in deltas; the floor is the only patcher of ConfigMaps in a run.
func floorCost(deltas map[string]*metricDelta) (requests, seconds float64) {
	var n, t, fn, ft float64
	for _, d := range deltas {
		if d.family != "apiserver_request_duration_seconds" || d.labels["verb"] == "WATCH" || d.labels["verb"] == "CONNECT" {
			continue
		}
		n, t = n+d.count, t+d.sum
		if d.labels["verb"] == "PATCH" && d.labels["resource"] == "configmaps" {
			fn, ft = fn+d.count, ft+d.sum
		}
	}
	if n == 0 || t == 0 {
		return 0, 0
	}
	return fn / n, ft / t
}

// floorStats summarises floor samples against vanilla's starts
// processing median.
func floorStats(xs []float64, vanillaP50 float64) (p50, p90 float64, allowed *float64) {
	if len(xs) == 0 {
		return 0, 0, nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	p50, p90 = quantile(s, 0.5), quantile(s, 0.9)
	if vanillaP50 > 0 {
		a := 1 - p50/vanillaP50
		if !math.IsNaN(a) {
			allowed = &a
		}
	}
	return p50, p90, allowed
}

// floorSamples are one arm's floor times in one case and what kept a
// trigger from one.
type floorSamples struct {
	ms                      []float64
	missed, dropped, failed int
}

// recordFloor times the iteration's triggers' floor writes in the audit
// log and logs the iteration's median.
func (k *knRun) recordFloor(w *knWorld, key churnKey, events []auditEvent, trigs []*knTrigger) {
	if w.floor == nil {
		return
	}
	fs := k.floor[key]
	if fs == nil {
		fs = &floorSamples{}
		k.floor[key] = fs
	}
	var these []float64
	for _, t := range trigs {
		if v, ok := auditFloor(events, t); ok {
			these = append(these, v)
		} else {
			fs.missed++
		}
	}
	fs.ms = append(fs.ms, these...)
	dropped, failed := w.floor.takeCounts()
	fs.dropped += dropped
	fs.failed += failed
	p50, p90, _ := floorStats(these, 0)
	k.logf("   %s %s/%d: floor (trigger -> the responder's write, audit log) p50 %.0f ms, p90 %.0f ms over %d of %d triggers",
		w.ctl, key.c.Mode, key.c.Burst, p50, p90, len(these), len(trigs))
}

// floorList gives each arm's floor per case beside vanilla's audit-log
// starts processing median.
func (k *knRun) floorList() []FloorStats {
	if len(k.floor) == 0 {
		return nil
	}
	out := []FloorStats{}
	for _, c := range k.opts.Cases {
		var vanilla []float64
		for _, s := range k.auditSamples {
			if s.Controller == Vanilla && s.Mode == c.Mode && s.Burst == c.Burst && s.Stage == StartsProcessing {
				vanilla = append(vanilla, s.Ms)
			}
		}
		vp50 := Summarize(vanilla).P50
		for _, ctl := range k.opts.Controllers {
			fs := k.floor[churnKey{ctl, c}]
			if fs == nil {
				continue
			}
			p50, p90, allowed := floorStats(fs.ms, vp50)
			reqShare, timeShare := floorCost(k.apiserver[churnKey{ctl, c}])
			out = append(out, FloorStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst, N: len(fs.ms), P50: p50, P90: p90,
				Missed: fs.missed, Dropped: fs.dropped, Failed: fs.failed, VanillaStartsProcessingMs: vp50, AllowedReduction: allowed,
				RequestShare: reqShare, TimeShare: timeShare})
		}
	}
	return out
}

// writeFloor adds the floor and the triggers' phases to report.md.
func (r *Report) writeFloor(b *strings.Builder) {
	if len(r.Floor) > 0 {
		b.WriteString("\n## Floor: the KPA's trigger to a responder's one write (audit log)\n\nHow fast a controller that only watches (from the benchmark's process) and writes once starts processing under each arm's load, not a strict bound; `allowed` is the reduction of vanilla's starts processing median that floor would allow.\n\n| controller | mode | burst | n | missed | p50 ms | p90 ms | vanilla starts processing p50 ms | allowed | share of API server requests / time |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, f := range r.Floor {
			allowed := "-"
			if f.AllowedReduction != nil {
				allowed = fmt.Sprintf("%.1f%%", 100**f.AllowedReduction)
			}
			fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %.0f | %.0f | %.0f | %s | %.2f%% / %.2f%% |\n", f.Controller, f.Mode, f.Burst, f.N, f.Missed+f.Dropped+f.Failed, f.P50, f.P90, f.VanillaStartsProcessingMs, allowed, 100*f.RequestShare, 100*f.TimeShare)
		}
	}
	if len(r.TriggerPhase) > 0 {
		b.WriteString("\n## Where the triggers fell on the interference's grid\n\n| controller | mode | burst | period ms | phase p50 ms | phase p95 ms | during a burst | after | burst absorbed p50 ms | traffic at a burst (lead ms) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, p := range r.TriggerPhase {
			fmt.Fprintf(b, "| %s | %s | %d | %.0f | %.0f | %.0f | %d | %d | %.0f | %v (%.0f) |\n", p.Controller, p.Mode, p.Burst, p.PeriodMs, p.Phase.P50, p.Phase.P95, p.DuringBurst, p.AfterBurst, p.Absorbed.P50, p.TrafficAtBurst, p.TrafficLeadMs)
		}
	}
}
