package sim

import (
	"context"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/policy/policytest"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// The simulator runs every conformance script of the driver contract
// (pkg/policy/policytest), the same scripts the live dispatcher runs.
func TestConformance(t *testing.T) {
	policytest.RunScripts(t, "../policy/policytest/testdata", func(t *testing.T) policytest.Driver {
		return &scripted{t: t}
	})
}

// scripted is the simulator's engine with the script's requests for
// arrivals: execution times and outputs come from the script instead of
// the workload's models, every cold start takes the script's, and the
// clock moves only when the script says.
type scripted struct {
	t     *testing.T
	e     *engine
	evs   []policytest.Event
	ord   map[int32]int // a container's ordinal among its function's
	count []int
}

func (s *scripted) Name() string { return "sim" }

func (s *scripted) Setup(st policytest.Setup) error {
	app := workload.App{Name: "script", MinSize: 1, MaxSize: stack.DefaultMaxSize}
	var scale []ScaleBounds
	var crit []int
	for _, f := range st.Functions {
		slo := f.SLO
		// The SLO split weighs each function by its execution time at the
		// largest size; a constant equal to the declared SLO makes the
		// split the live dispatcher's, which weighs by declared SLOs.
		app.Chain = append(app.Chain, workload.Function{Name: f.Name, SizeSensitive: true,
			ExecMean: func(float64) time.Duration { return slo }, OutputMean: func(x float64) float64 { return x }})
		app.SLO += f.SLO
		scale = append(scale, ScaleBounds{Min: f.MinScale, Max: f.MaxScale})
		crit = append(crit, f.Criticality)
	}
	if st.AppSLO > 0 {
		app.SLO = st.AppSLO
	}
	cores := st.Capacity
	if cores == 0 {
		cores = policy.DefaultMaxQueue // the live view's cap without a capacity
	}
	cfg := Config{App: app, Dist: dist(s.t, "uniform"), Trace: trace.Trace{Name: "script", PerSecond: make([]float64, 3600)},
		Policy: st.Policy, Seed: st.Seed, Nodes: 1, CoresPerNode: cores, ColdStart: st.ColdStart,
		Tick: st.Tick, Window: st.Window, IdleTimeout: st.IdleTimeout, MaxQueue: st.MaxQueue, AsyncDeadline: st.AsyncDeadline, Scale: scale, Criticality: crit, ColdBoot: true, NoBound: true}
	cfg.applyDefaults()
	spec := policySpec(&cfg)
	if st.Policy == "oracle" {
		for _, f := range st.Functions {
			var plan []policy.PlanStep
			for _, p := range f.Plan {
				plan = append(plan, policy.PlanStep{At: p.At, Live: p.Live})
			}
			spec.Truth.Planned = append(spec.Truth.Planned, plan)
		}
	}
	pol, err := policy.New(st.Policy, spec)
	if err != nil {
		return err
	}
	e, err := newEngine(context.Background(), cfg, pol)
	if err != nil {
		return err
	}
	s.e, s.ord, s.count = e, map[int32]int{}, make([]int, len(app.Chain))
	e.observe = s.note
	e.events.push(0, evTick, 0)
	return nil
}

func (s *scripted) note(o observation) {
	ev := policytest.Event{At: time.Duration(o.at), Fn: int(o.fn), Req: int(o.req)}
	switch o.kind {
	case obsStart:
		s.count[o.fn]++
		s.ord[o.ctr] = s.count[o.fn]
		ev.Kind = policytest.Start
	case obsReady:
		ev.Kind = policytest.Ready
	case obsRun:
		ev.Kind = policytest.Run
	case obsStop:
		ev.Kind = policytest.Stop
	case obsRefuse:
		ev.Kind = policytest.Refuse
	}
	if o.ctr >= 0 {
		ev.Inst = s.ord[o.ctr]
	}
	s.evs = append(s.evs, ev)
}

func (s *scripted) Arrive(r policytest.Request) {
	e := s.e
	id := e.newRequest()
	req := &e.reqs[id]
	req.id, req.arrival, req.size, req.class = int64(r.ID), e.now, r.Size, r.Class
	n := len(e.fns)
	for f := range n {
		e.chainExec[int(id)*n+f] = int64(r.Exec[f])
		e.chainOut[int(id)*n+f] = r.Output[f]
	}
	e.arrivals++
	e.countInFlight(1)
	e.enqueue(0, id)
	s.check()
}

func (s *scripted) Advance(t time.Duration) {
	e := s.e
	for e.events.len() > 0 && e.events.ev[0].at <= int64(t) {
		ev := e.events.pop()
		e.now = ev.at
		e.handle(ev)
		s.check()
	}
	e.now = int64(t)
}

func (s *scripted) check() {
	if s.e.err != nil {
		s.t.Fatal(s.e.err)
	}
}

func (s *scripted) Events() []policytest.Event {
	out := s.evs
	s.evs = nil
	return out
}

func (s *scripted) Budgets() []time.Duration {
	var out []time.Duration
	for i := range s.e.fns {
		out = append(out, time.Duration(s.e.fns[i].deadline))
	}
	return out
}

func (s *scripted) Close() {}
