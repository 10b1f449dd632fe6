package orchbench

import (
	"slices"
	"time"
)

// Where the KPA's triggers fall on the interference's grid. The paper
// releases a burst every 10 s "as most scale-up events occur during the
// initial transition from a scaled-to-zero state": what vanilla's
// controller-manager does to a scale-up depends on whether it is still
// working through a burst when the trigger comes. The grid starts with
// the iteration (pacer.go); a trigger's phase is its time since the
// latest slot's start, and the burst is still being absorbed while
// interference pods of that slot are still being created (the last
// step of a burst in either arm: the ReplicaSet controller's or the Gantry
// controller's pod creates), read from the audit log.

// gridPhase is at's time since the start of its slot of the grid that
// starts at start with period every; a time before start is taken on the
// grid extended backwards.
func gridPhase(at, start time.Time, every time.Duration) time.Duration {
	if every <= 0 {
		return 0
	}
	p := at.Sub(start) % every
	if p < 0 {
		p += every
	}
	return p
}

// slotOf is the start of at's slot of the grid.
func slotOf(at, start time.Time, every time.Duration) time.Time {
	return at.Add(-gridPhase(at, start, every))
}

// burstBusy says whether the interference of at's slot was still being
// absorbed at at: an interference pod create of that slot completed
// after at. creates are the completions of the interference's pod
// creates.
func burstBusy(at, start time.Time, every time.Duration, creates []time.Time) bool {
	if every <= 0 {
		return false
	}
	end := slotOf(at, start, every).Add(every)
	for _, c := range creates {
		if c.After(at) && c.Before(end) {
			return true
		}
	}
	return false
}

// slotAbsorbed gives, for every slot of the grid with interference pod
// creates, the time from the slot's start to its last create's
// completion: how long the burst took to absorb.
func slotAbsorbed(start time.Time, every time.Duration, creates []time.Time) []time.Duration {
	if every <= 0 {
		return nil
	}
	last := map[time.Time]time.Time{}
	for _, c := range creates {
		s := slotOf(c, start, every)
		if c.After(last[s]) {
			last[s] = c
		}
	}
	var out []time.Duration
	for s, c := range last {
		out = append(out, c.Sub(s))
	}
	slices.Sort(out)
	return out
}

// churnPodCreates are the completions of the interference's pod creates
// in events (of the interference's namespace); the audit log has one
// event per create (the policy omits RequestReceived).
func churnPodCreates(events []auditEvent) []time.Time {
	var out []time.Time
	for i := range events {
		if e := &events[i]; e.ObjectRef.Resource == "pods" && e.Verb == "create" {
			out = append(out, e.Done.Time)
		}
	}
	return out
}

// PhaseStats is where one arm's triggers fell on the interference's grid
// in one case: their phase (ms since the latest burst was due), how many
// came while that burst's pods were still being created, and how long
// the bursts took to absorb (ms from due to the last pod created).
type PhaseStats struct {
	Controller  string  `json:"controller"`
	Mode        string  `json:"mode"`
	Burst       int     `json:"burst"`
	PeriodMs    float64 `json:"period_ms"`
	Phase       Summary `json:"phase"`
	DuringBurst int     `json:"during_burst"`
	AfterBurst  int     `json:"after_burst"`
	Absorbed    Summary `json:"absorbed"`
	// TrafficAtBurst says the traffic started when a burst was due
	// (--traffic-at-burst).
	TrafficAtBurst bool    `json:"traffic_at_burst"`
	TrafficLeadMs  float64 `json:"traffic_lead_ms"`
}

// phaseSamples gathers one arm's phases in one case.
type phaseSamples struct {
	period         time.Duration
	phases         []float64
	during, after  int
	absorbed       []float64
	trafficAtBurst bool
	trafficLead    time.Duration
}

// add records triggers at ats against the grid (start, every) and the
// interference's pod creates.
func (p *phaseSamples) add(ats []time.Time, start time.Time, every time.Duration, creates []time.Time) {
	p.period = every
	for _, at := range ats {
		p.phases = append(p.phases, durMs(gridPhase(at, start, every)))
		if burstBusy(at, start, every, creates) {
			p.during++
		} else {
			p.after++
		}
	}
	for _, d := range slotAbsorbed(start, every, creates) {
		p.absorbed = append(p.absorbed, durMs(d))
	}
}

func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// trafficStart is when an iteration's traffic starts after the
// interference's: the warm-up, or with atBurst lead before the first
// burst due at or after warmup+lead (lead 0: with that burst). The KPA
// writes its first scale from zero a second or more after the first
// request (the activator's stat, the autoscaler's tick), so a lead of
// that much makes its triggers meet the burst.
func trafficStart(warmup, every time.Duration, atBurst bool, lead time.Duration) time.Duration {
	if !atBurst || every <= 0 {
		return warmup
	}
	return (warmup+lead+every-1)/every*every - lead
}

// recordPhases places the iteration's triggers (the KPA's /scale write's
// completion in the audit log, else the watch's arrival) on the case's
// grid, which started at start, and logs how many met a burst being
// absorbed.
func (k *knRun) recordPhases(w *knWorld, key churnKey, events []auditEvent, trigs []*knTrigger, start time.Time) {
	creates := churnPodCreates(k.churnLog.read(w.churnNS))
	every := k.opts.knPacing(key.c).every(key.c)
	ats := make([]time.Time, 0, len(trigs))
	for _, t := range trigs {
		at := t.at
		if e := triggerEvent(events, t); e != nil {
			at = e.Done.Time
		}
		ats = append(ats, at)
	}
	ps := k.phases[key]
	if ps == nil {
		ps = &phaseSamples{trafficAtBurst: k.opts.KN.TrafficAtBurst, trafficLead: k.opts.KN.TrafficLead}
		k.phases[key] = ps
	}
	var these phaseSamples
	these.add(ats, start, every, creates)
	ps.add(ats, start, every, creates)
	k.logf("   %s %s/%d: triggers' phase on the %v grid p50 %.0f ms; %d while the burst's pods were still being created, %d after; bursts absorbed in p50 %.0f ms",
		w.ctl, key.c.Mode, key.c.Burst, every, Summarize(these.phases).P50, these.during, these.after, Summarize(these.absorbed).P50)
}

// phaseList gives each arm's phases per case.
func (k *knRun) phaseList() []PhaseStats {
	if len(k.phases) == 0 {
		return nil
	}
	out := []PhaseStats{}
	for _, c := range k.opts.Cases {
		for _, ctl := range k.opts.Controllers {
			if ps := k.phases[churnKey{ctl, c}]; ps != nil {
				out = append(out, PhaseStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst, PeriodMs: durMs(ps.period),
					Phase: Summarize(ps.phases), DuringBurst: ps.during, AfterBurst: ps.after, Absorbed: Summarize(ps.absorbed), TrafficAtBurst: ps.trafficAtBurst, TrafficLeadMs: durMs(ps.trafficLead)})
			}
		}
	}
	return out
}
