package orchbench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"
)

// RequestStats counts one arm's requests in one case; their latency is
// the runs' request_latency row, whose missed is Failed's total.
type RequestStats struct {
	Controller string `json:"controller"`
	Mode       string `json:"mode"`
	Burst      int    `json:"burst"`
	Sent       int    `json:"sent"`
	OK         int    `json:"ok"`
	// Failed counts the failures by reason: an HTTP status, "timeout" or
	// "error" (the connection).
	Failed map[string]int `json:"failed"`
}

// TriggerStats counts one arm's scale-up triggers in one case.
type TriggerStats struct {
	Controller string `json:"controller"`
	Mode       string `json:"mode"`
	Burst      int    `json:"burst"`
	// Triggers are the KPA's writes that raised a scale target's replicas,
	// each timed (or missed) in the runs; Writers counts them by the field
	// manager whose /scale entry owns spec.replicas ("autoscaler").
	Triggers int            `json:"triggers"`
	Writers  map[string]int `json:"writers"`
	// Cancelled scale-ups were lowered again before every stage was seen;
	// Foreign rises of replicas were not written through /scale. Neither
	// is in the runs.
	Cancelled int `json:"cancelled"`
	Foreign   int `json:"foreign"`
	// ForeignWriters names who owned spec.replicas after each foreign
	// rise, "manager (operation)".
	ForeignWriters map[string]int `json:"foreign_writers,omitempty"`
}

// recordKnative turns an iteration's triggers and requests into samples.
func (k *knRun) recordKnative(w *knWorld, c Case, rep int, tr *traffic, start time.Time) {
	foreignBy := w.tracker.takeForeign()
	trigs, cancelled, foreign, managers := w.tracker.take()
	key := churnKey{w.ctl, c}
	ts := k.triggers[key]
	if ts == nil {
		ts = &TriggerStats{Controller: w.ctl, Mode: c.Mode, Burst: c.Burst, Writers: map[string]int{}}
		k.triggers[key] = ts
	}
	ts.Triggers += len(trigs)
	ts.Cancelled += cancelled
	ts.Foreign += foreign
	for m, n := range managers {
		ts.Writers[m] += n
	}
	for m, n := range foreignBy {
		if ts.ForeignWriters == nil {
			ts.ForeignWriters = map[string]int{}
		}
		ts.ForeignWriters[m] += n
	}
	k.lastTriggers = len(trigs)
	if isGantry(w.ctl) {
		k.addParts(w.ctl, c, k.breakdowns(w.svcNS, trigs))
	}
	k.recordAudit(w, c, rep, trigs, start)
	for _, t := range trigs {
		for st, at := range t.seen {
			if at.IsZero() {
				k.missed[missKey{w.ctl, c, Stage(st)}]++
				continue
			}
			ms := max(0, float64(at.Sub(t.at))/float64(time.Millisecond))
			k.samples = append(k.samples, Sample{Controller: w.ctl, Mode: c.Mode, Burst: c.Burst, Rep: rep, Service: t.service, Stage: Stage(st), Ms: ms})
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, ms := range tr.lat {
		k.samples = append(k.samples, Sample{Controller: w.ctl, Mode: c.Mode, Burst: c.Burst, Rep: rep, Stage: RequestLatency, Ms: ms})
	}
	rs := k.requests[key]
	if rs == nil {
		rs = &RequestStats{Controller: w.ctl, Mode: c.Mode, Burst: c.Burst, Failed: map[string]int{}}
		k.requests[key] = rs
	}
	rs.Sent += tr.sent
	rs.OK += tr.ok
	for reason, n := range tr.failed {
		rs.Failed[reason] += n
		k.missed[missKey{w.ctl, c, RequestLatency}] += n
	}
}

// lastP50 is the medians of the stages of the arm and case so far.
func (k *knRun) lastP50(ctl string, c Case) (sp, pc, pr float64) {
	vals := func(st Stage) []float64 {
		var out []float64
		for _, s := range k.samples {
			if s.Controller == ctl && s.Mode == c.Mode && s.Burst == c.Burst && s.Stage == st {
				out = append(out, s.Ms)
			}
		}
		return out
	}
	return Summarize(vals(StartsProcessing)).P50, Summarize(vals(PodsCreated)).P50, Summarize(vals(PodsReady)).P50
}

func (k *knRun) requestList() []RequestStats {
	out := []RequestStats{}
	for _, c := range k.opts.Cases {
		for _, ctl := range k.opts.Controllers {
			if rs := k.requests[churnKey{ctl, c}]; rs != nil {
				cp := *rs
				cp.Failed = maps.Clone(rs.Failed)
				out = append(out, cp)
			}
		}
	}
	return out
}

func (k *knRun) triggerList() []TriggerStats {
	out := []TriggerStats{}
	for _, c := range k.opts.Cases {
		for _, ctl := range k.opts.Controllers {
			if ts := k.triggers[churnKey{ctl, c}]; ts != nil {
				cp := *ts
				cp.Writers = maps.Clone(ts.Writers)
				out = append(out, cp)
			}
		}
	}
	return out
}

// writeKnativeTable prints a Knative run's requests and triggers.
func (r *Report) writeKnativeTable(w io.Writer) error {
	if len(r.Requests) == 0 && len(r.Triggers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "controller\tmode\tburst\trequests\tok\tfailed\tscale-ups\tby\tcancelled\tforeign\t")
	for i, rs := range r.Requests {
		var ts TriggerStats
		if i < len(r.Triggers) {
			ts = r.Triggers[i]
		}
		failed, by := "", ""
		for _, k := range slices.Sorted(maps.Keys(rs.Failed)) {
			failed += fmt.Sprintf("%s:%d ", k, rs.Failed[k])
		}
		for _, k := range slices.Sorted(maps.Keys(ts.Writers)) {
			by += fmt.Sprintf("%s:%d ", k, ts.Writers[k])
		}
		if failed == "" {
			failed = "0"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%d\t%d\t\n", rs.Controller, rs.Mode, rs.Burst, rs.Sent, rs.OK,
			failed, ts.Triggers, by, ts.Cancelled, ts.Foreign)
	}
	return tw.Flush()
}

// breakdowns joins the Gantry controller's reconcile traces to the
// iteration's triggers (by scale target and generation) and splits each
// scale-up by Components, from the trigger's arrival here. A trace is
// reported when its reconcile ends, so the last ones get a moment; the
// traces nobody took (the interference's) are dropped.
func (k *knRun) breakdowns(ns string, trigs []*knTrigger) []map[string]float64 {
	defer k.traces.clear()
	deadline := time.Now().Add(3 * time.Second)
	var out []map[string]float64
	for _, t := range trigs {
		if t.seen[StartsProcessing].IsZero() {
			continue
		}
		if tr, ok := k.traces.take(ns, t.target, t.gen, time.Until(deadline)); ok {
			out = append(out, breakdown(tr, t.at, t.seen))
		}
	}
	return out
}

// auditFlush is how long the API server may hold audit events in its
// batch (--audit-log-batch-max-wait), and a margin.
const auditFlush = 2 * time.Second

// recordAudit times the iteration's triggers in the audit log.
func (k *knRun) recordAudit(w *knWorld, c Case, rep int, trigs []*knTrigger, start time.Time) {
	if k.audit == nil {
		return
	}
	time.Sleep(auditFlush)
	events := k.audit.read(w.svcNS)
	key := churnKey{w.ctl, c}
	if k.auditParts[key] == nil {
		k.auditParts[key], k.auditWriters[key] = map[string][]float64{}, map[string][]float64{}
	}
	for name, xs := range auditWriters(events) {
		k.auditWriters[key][name] = append(k.auditWriters[key][name], xs...)
	}
	if k.auditWatches[key] == nil {
		k.auditWatches[key] = map[string][]float64{}
	}
	for name, xs := range auditWatchEnds(k.watchLog.readWatchEnds()) {
		k.auditWatches[key][name] = append(k.auditWatches[key][name], xs...)
	}
	k.recordFloor(w, key, events, trigs)
	k.recordPhases(w, key, events, trigs, start)
	for _, t := range trigs {
		for name, xs := range auditParts(events, t, !isGantry(w.ctl)) {
			k.auditParts[key][name] = append(k.auditParts[key][name], xs...)
		}
		sp, pc, spOK, pcOK, ok := auditStages(events, t, !isGantry(w.ctl))
		for _, s := range []struct {
			st Stage
			v  float64
			ok bool
		}{{StartsProcessing, sp, ok && spOK}, {PodsCreated, pc, ok && pcOK}} {
			if !s.ok {
				k.auditMissed[missKey{w.ctl, c, s.st}]++
				continue
			}
			k.auditSamples = append(k.auditSamples, Sample{Controller: w.ctl, Mode: c.Mode, Burst: c.Burst, Rep: rep, Service: t.service, Stage: s.st, Ms: s.v})
		}
	}
}

// auditReport summarises the audit log's stages and Gantry's reductions.
func (k *knRun) auditReport() ([]RunStats, []Reduction) {
	if k.audit == nil {
		return nil, nil
	}
	vals := func(ctl string, c Case, st Stage) []float64 {
		var out []float64
		for _, s := range k.auditSamples {
			if s.Controller == ctl && s.Mode == c.Mode && s.Burst == c.Burst && s.Stage == st {
				out = append(out, s.Ms)
			}
		}
		return out
	}
	runs, reds := []RunStats{}, []Reduction{}
	stages := []Stage{StartsProcessing, PodsCreated}
	for _, c := range k.opts.Cases {
		for _, ctl := range k.opts.Controllers {
			for _, st := range stages {
				runs = append(runs, RunStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst, Stage: st.String(),
					Summary: Summarize(vals(ctl, c, st)), Missed: k.auditMissed[missKey{ctl, c, st}]})
			}
		}
		if slices.Contains(k.opts.Controllers, Vanilla) && slices.Contains(k.opts.Controllers, Gantry) {
			for _, st := range stages {
				reds = append(reds, Reduction{Mode: c.Mode, Burst: c.Burst, Stage: st.String(),
					MedianReduction: finiteOrNil(MedianReduction(vals(Vanilla, c, st), vals(Gantry, c, st)))})
			}
		}
	}
	return runs, reds
}

// auditPartList summarises the audit log's parts (AuditParts) and every
// writer's API server time, in report order.
func (k *knRun) auditPartList() (parts, writers []RunStats) {
	if k.audit == nil {
		return nil, nil
	}
	parts, writers = []RunStats{}, []RunStats{}
	for _, c := range k.opts.Cases {
		for _, ctl := range k.opts.Controllers {
			key := churnKey{ctl, c}
			for _, name := range AuditParts {
				if xs := k.auditParts[key][name]; len(xs) > 0 {
					parts = append(parts, RunStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst, Stage: name, Summary: Summarize(xs)})
				}
			}
			for _, name := range slices.Sorted(maps.Keys(k.auditWriters[key])) {
				writers = append(writers, RunStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst, Stage: name, Summary: Summarize(k.auditWriters[key][name])})
			}
		}
	}
	return parts, writers
}

// auditWatchList gives, per arm and case, the lifetimes of the watches
// of the scale targets that the API server ended before their timeout,
// by watcher (Stage names it).
func (k *knRun) auditWatchList() []RunStats {
	if k.audit == nil {
		return nil
	}
	out := []RunStats{}
	for _, c := range k.opts.Cases {
		for _, ctl := range k.opts.Controllers {
			key := churnKey{ctl, c}
			for _, name := range slices.Sorted(maps.Keys(k.auditWatches[key])) {
				out = append(out, RunStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst, Stage: name, Summary: Summarize(k.auditWatches[key][name])})
			}
		}
	}
	return out
}
