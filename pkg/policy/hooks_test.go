package policy

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// hooks is what the live dispatcher asserts a policy to when it uses the
// optional hooks.
type hooks interface {
	SetColdStart(d time.Duration)
	LookAhead(now time.Time, views []View, out []Decision)
}

func mustHooks(t *testing.T, name string, s Spec) hooks {
	t.Helper()
	h, ok := mustNew(t, name, s).(hooks)
	if !ok {
		t.Fatalf("%s has no SetColdStart and LookAhead", name)
	}
	return h
}

// The Reactive Scaler starts a container for a request only when no live
// container can start it within a cold start: the measured cold start,
// once set, decides that instead of the declared one.
func TestSetColdStartMovesTheReactiveScalersLead(t *testing.T) {
	p := mustNew(t, "isbatch", spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true}))
	h := p.(hooks)
	out := make([]Decision, 1)
	// One 100 ms request, the only container busy for another 2 s.
	behind := func(busy time.Duration) []View {
		return []View{{Counts: Counts{Live: 1, Queued: 1}, Free: []time.Duration{busy}, Queue: []Item{{Size: 1, Exec: 100 * ms}}}}
	}
	at := t0
	plan := func(busy time.Duration) int {
		at = at.Add(ms)
		p.Plan(at, behind(busy), out)
		return out[0].Add
	}
	if n := plan(2 * time.Second); n != 1 {
		t.Fatalf("declared cold start 1.5 s: added %d, want 1 (a new container starts it sooner than the busy one)", n)
	}
	h.SetColdStart(3 * time.Second)
	if n := plan(2 * time.Second); n != 0 {
		t.Fatalf("measured cold start 3 s: added %d, want 0 (the busy container is free sooner)", n)
	}
	h.SetColdStart(-time.Second)
	if n := plan(2 * time.Second); n != 0 {
		t.Fatalf("a negative cold start replaced the 3 s one: added %d, want 0", n)
	}
	h.SetColdStart(500 * ms)
	if n := plan(2 * time.Second); n != 1 {
		t.Fatalf("measured cold start 500 ms: added %d, want 1", n)
	}
	// An hour plans as MaxColdStart: a container busy past it loses to a
	// new one, one free before it does not.
	h.SetColdStart(time.Hour)
	if n := plan(MaxColdStart + time.Minute); n != 1 {
		t.Fatalf("cold start of an hour, container busy past the %v bound: added %d, want 1", MaxColdStart, n)
	}
	if n := plan(MaxColdStart - time.Minute); n != 0 {
		t.Fatalf("cold start of an hour, container free before the %v bound: added %d, want 0", MaxColdStart, n)
	}
	h.SetColdStart(math.MaxInt64)
	if n := plan(MaxColdStart + time.Minute); n != 1 {
		t.Fatalf("the largest Duration as cold start: added %d, want 1", n)
	}
	// The bound is on measurements: a declared cold start past it is
	// planned with as it is, as the simulator's containers take it.
	long := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
	long.ColdStart = 2 * MaxColdStart
	p = mustNew(t, "isbatch", long)
	if n := plan(MaxColdStart + time.Minute); n != 0 {
		t.Fatalf("declared cold start %v, container busy for %v: added %d, want 0", long.ColdStart, MaxColdStart+time.Minute, n)
	}
}

// The Look-Ahead Scaler's horizon: a request still upstream is left to a
// busy downstream container only when a new one could not serve it sooner.
func TestSetColdStartMovesTheLookAheadHorizon(t *testing.T) {
	s := spec(FunctionSpec{Name: "a", SLO: 400 * ms, SizeSensitive: true}, FunctionSpec{Name: "b", SLO: 600 * ms, SizeSensitive: true})
	views := []View{
		{Counts: Counts{Live: 1, Queued: 1}, Free: []time.Duration{0}, Queue: []Item{{Size: 10, Exec: 100 * ms}}},
		{Counts: Counts{Live: 1}, Free: []time.Duration{2 * time.Second}},
	}
	out := make([]Decision, 2)
	for _, c := range []struct {
		cold time.Duration
		want int
	}{{0, 1}, {3 * time.Second, 0}, {time.Second, 1}, {2500 * ms, 0}} {
		h := mustHooks(t, "cypress", s)
		if c.cold > 0 {
			h.SetColdStart(c.cold)
		} else {
			c.cold = s.ColdStart
		}
		h.LookAhead(t0, views, out)
		if out[1].Add != c.want {
			t.Fatalf("cold start %v, b busy for 2 s: look-ahead added %d at b, want %d", c.cold, out[1].Add, c.want)
		}
	}
}

// A request arriving at the head of a chain makes LookAhead start
// containers at every function downstream, with no Plan ever called, and
// nothing else: not at the head, whose queue the reactive rule would
// scale, and not the proactive targets.
func TestLookAheadScalesTheChainOnArrivalWithoutPlan(t *testing.T) {
	s := spec(FunctionSpec{Name: "a", SLO: 300 * ms, SizeSensitive: true},
		FunctionSpec{Name: "b", SLO: 300 * ms, SizeSensitive: true},
		FunctionSpec{Name: "c", SLO: 300 * ms, SizeSensitive: true})
	head := View{Counts: Counts{Live: 1, Queued: 3}, Free: []time.Duration{3 * time.Second},
		Queue: []Item{{Size: 50, Exec: 100 * ms}, {Size: 50, Exec: 100 * ms}, {Size: 50, Exec: 100 * ms}}}
	views := []View{head, {}, {}}
	for _, name := range []string{"cypress", "gantry", "gantry-no-panic", "isbatch", "cypress-cp"} {
		p := mustNew(t, name, s)
		h := p.(hooks)
		p.Arrive(t0, 0, 50, head.Counts)
		out := make([]Decision, 3)
		h.LookAhead(t0, views, out)
		if out[0] != (Decision{}) {
			t.Errorf("%s: LookAhead decided %+v for the head", name, out[0])
		}
		if name == "isbatch" || name == "cypress-cp" {
			if out[1] != (Decision{}) || out[2] != (Decision{}) {
				t.Errorf("%s has no Look-Ahead Scaler but LookAhead decided %+v", name, out)
			}
			continue
		}
		if out[1].Add < 1 || out[2].Add < 1 || out[1].Retire != 0 || out[2].Retire != 0 {
			t.Errorf("%s: LookAhead decided %+v, want containers started at b and c", name, out)
		}
		p.Plan(t0.Add(ms), views, out)
		if out[0].Add == 0 {
			t.Errorf("%s: Plan left the head's overloaded queue alone, so the test shows nothing", name)
		}
	}
	// With proactive targets set and nothing queued, LookAhead starts
	// nothing where Plan would start the targets.
	one := spec(FunctionSpec{Name: "a", SLO: time.Second, SizeSensitive: true}, FunctionSpec{Name: "b", SLO: time.Second, SizeSensitive: true})
	p := mustNew(t, "cypress", one)
	empty := make([]View, 2)
	got := feed(t, p, 4, 20, func(r *rand.Rand) float64 { return 1 + 99*r.Float64() },
		func(x float64) time.Duration { return time.Duration(x) * 5 * ms }, empty)
	if got[0].Add == 0 || got[1].Add == 0 {
		t.Fatalf("the proactive scaler set no targets (%+v), so the test shows nothing", got)
	}
	out := make([]Decision, 2)
	p.(hooks).LookAhead(t0.Add(40*time.Second+ms), empty, out)
	if out[0] != (Decision{}) || out[1] != (Decision{}) {
		t.Fatalf("LookAhead with empty queues decided %+v: it ran the proactive scaler", out)
	}
}

// chainViews is a two-function chain with twenty requests at the head and
// nothing downstream.
func chainViews() []View {
	queue := make([]Item, 20)
	for i := range queue {
		queue[i] = Item{Size: 50, Exec: 300 * ms}
	}
	return []View{{Counts: Counts{Live: 20, Queued: 20}, Free: make([]time.Duration, 20), Queue: queue}, {}}
}

// LookAhead then Plan at the same instant start what Plan alone starts,
// whether the views given to Plan show the look-ahead's containers or not.
func TestLookAheadThenPlanAtOneInstantDoNotScaleTwice(t *testing.T) {
	s := spec(FunctionSpec{Name: "a", SLO: 500 * ms, SizeSensitive: true}, FunctionSpec{Name: "b", SLO: 500 * ms, SizeSensitive: true})
	alone := make([]Decision, 2)
	mustNew(t, "cypress", s).Plan(t0, chainViews(), alone)
	if alone[1].Add == 0 {
		t.Fatal("Plan alone started nothing downstream, so the test shows nothing")
	}

	// The views do not show what LookAhead started.
	p := mustNew(t, "cypress", s)
	ahead, out := make([]Decision, 2), make([]Decision, 2)
	p.(hooks).LookAhead(t0, chainViews(), ahead)
	if ahead[1].Add != alone[1].Add {
		t.Fatalf("LookAhead started %d at b, Plan alone %d", ahead[1].Add, alone[1].Add)
	}
	again := make([]Decision, 2)
	p.(hooks).LookAhead(t0, chainViews(), again)
	if again[1].Add != 0 {
		t.Fatalf("a second LookAhead at the same instant started %d more", again[1].Add)
	}
	p.Plan(t0, chainViews(), out)
	if out[1].Add != 0 || out[0] != alone[0] {
		t.Fatalf("Plan after LookAhead decided %+v (LookAhead %+v), want b's containers started once: Plan alone %+v", out, ahead, alone)
	}

	// The views show them, as the live dispatcher's do: starting, a whole
	// cold start away.
	p = mustNew(t, "cypress", s)
	p.(hooks).LookAhead(t0, chainViews(), ahead)
	fresh := chainViews()
	fresh[1].Live, fresh[1].Starting = ahead[1].Add, ahead[1].Add
	for range ahead[1].Add {
		fresh[1].Free = append(fresh[1].Free, s.ColdStart)
	}
	p.Plan(t0, fresh, out)
	if out[1].Add != 0 {
		t.Fatalf("Plan after LookAhead, views showing its %d containers, started %d more", ahead[1].Add, out[1].Add)
	}

	// Plan first, then LookAhead at the same instant on the same views.
	p = mustNew(t, "cypress", s)
	p.Plan(t0, chainViews(), out)
	p.(hooks).LookAhead(t0, chainViews(), ahead)
	if ahead[1].Add != 0 {
		t.Fatalf("LookAhead after Plan at the same instant started %d more at b", ahead[1].Add)
	}
}

// randomViews is a consistent random state of n functions.
func randomViews(rng *rand.Rand, n int, cold time.Duration) []View {
	views := make([]View, n)
	for f := range views {
		v := &views[f]
		v.Live = rng.IntN(6)
		v.Starting = rng.IntN(v.Live + 1)
		v.Idle = rng.IntN(v.Live - v.Starting + 1)
		v.Queued = rng.IntN(9)
		for range v.Queued {
			it := Item{Size: 1 + 99*rng.Float64(), Exec: time.Duration(1 + rng.Int64N(int64(800*ms))),
				Waited: time.Duration(rng.Int64N(int64(2 * time.Second)))}
			v.Queue = append(v.Queue, it)
			v.MaxWait = max(v.MaxWait, it.Waited)
		}
		for range v.Starting {
			v.Free = append(v.Free, time.Duration(rng.Int64N(int64(cold)+1)))
		}
		for range v.Idle {
			v.Free = append(v.Free, 0)
		}
		for range v.Live - v.Starting - v.Idle {
			it := Item{Size: 1 + 99*rng.Float64(), Exec: time.Duration(1 + rng.Int64N(int64(800*ms)))}
			it.Waited = time.Duration(rng.Int64N(int64(it.Exec) + 1))
			v.Running = append(v.Running, it)
			v.Free = append(v.Free, it.Exec-it.Waited)
		}
	}
	return views
}

// Arrive, Complete, SetColdStart, LookAhead and Plan in random order, at
// random instants on random states: nothing panics, every decision is
// within what the state allows, and at every instant with a Plan, the
// Plan starts what a twin policy that saw the same calls but no LookAhead
// starts, less what the LookAheads before it at that instant started.
// LookAhead leaves no trace on the policy otherwise.
func TestHooksInRandomOrderStayWithinLimits(t *testing.T) {
	fns := []FunctionSpec{{Name: "a", SLO: 300 * ms, SizeSensitive: true},
		{Name: "b", SLO: 200 * ms, SizeSensitive: true}, {Name: "c", SLO: 400 * ms}}
	s := spec(fns...)
	s.Window = time.Second
	policies := []string{"cypress", "gantry", "isbatch", "cypress-cp", "cypress-no-cp", "gantry-no-stream",
		"gantry-panic-2sigma", "kraken", "fifer", "atoll", "commercial"}
	for _, name := range policies {
		for seed := range uint64(8) {
			rng := rand.New(rand.NewPCG(seed, 99))
			a, b := mustNew(t, name, s), mustNew(t, name, s)
			ha, hb := a.(hooks), b.(hooks)
			cold := s.ColdStart
			now := t0
			outA, outB, la := make([]Decision, 3), make([]Decision, 3), make([]Decision, 3)
			ahead := make([]int, 3)
			for range 300 {
				now = now.Add(time.Duration(1 + rng.Int64N(int64(1500*ms))))
				views := randomViews(rng, len(fns), cold)
				clear(ahead)
				planned := false
				for range 1 + rng.IntN(8) {
					switch op := rng.IntN(6); {
					case op == 0:
						fn := rng.IntN(len(fns))
						size := 1 + 99*rng.Float64()
						c := views[fn].Counts
						// An arrival starts at most the queued requests, but
						// one that raises a burst alarm starts what the burst
						// sizing lacks (burst.go).
						alarms := BurstAlarms(a)
						na, nb := a.Arrive(now, fn, size, c), b.Arrive(now, fn, size, c)
						limit := c.Queued
						if BurstAlarms(a) > alarms {
							limit = math.MaxInt
						}
						if na != nb || na < 0 || na > limit {
							t.Fatalf("%s seed %d: Arrive with %+v started %d and %d, want the same in [0, %d]", name, seed, c, na, nb, limit)
						}
					case op == 1:
						fn, size := rng.IntN(len(fns)), 1+99*rng.Float64()
						exec := time.Duration(1 + rng.Int64N(int64(300*ms)))
						bad := rng.IntN(10) == 0
						if bad {
							size = -size
						}
						ea, eb := a.Complete(fn, size, exec, size/2), b.Complete(fn, size, exec, size/2)
						if (ea != nil) != bad || (eb != nil) != bad {
							t.Fatalf("%s seed %d: Complete(size %v) errors %v and %v", name, seed, size, ea, eb)
						}
					case op == 2:
						d := time.Duration(rng.Int64N(int64(4*time.Second))) - 500*ms
						if rng.IntN(8) == 0 {
							d = time.Duration(math.MaxInt64 - rng.Int64N(10))
						}
						ha.SetColdStart(d)
						hb.SetColdStart(d)
						if d >= 0 {
							cold = min(d, MaxColdStart)
						}
					case op == 3 && !planned:
						a.Plan(now, views, outA)
						b.Plan(now, views, outB)
						planned = true
						for f, d := range outA {
							if d.Add < 0 || d.Retire < 0 || d.Retire > views[f].Idle || d.Retire > 0 && d.Add > 0 {
								t.Fatalf("%s seed %d: Plan decided %+v for %+v", name, seed, d, views[f].Counts)
							}
						}
					default:
						ha.LookAhead(now, views, la)
						upstream := 0
						for f, d := range la {
							limit := len(views[f].Queue) + upstream
							upstream += len(views[f].Queue) + len(views[f].Running)
							if f == 0 && d != (Decision{}) || d.Retire != 0 || d.Add < 0 || d.Add > limit {
								t.Fatalf("%s seed %d: LookAhead decided %+v for function %d, want 0 to %d started", name, seed, d, f, limit)
							}
							if !planned { // after the Plan, checked for limits only
								ahead[f] += d.Add
							}
						}
					}
				}
				if !planned {
					continue
				}
				for f := range fns {
					if outA[f].Add != max(0, outB[f].Add-ahead[f]) || outA[f].Retire != outB[f].Retire {
						t.Fatalf("%s seed %d at %v: function %d: LookAhead started %d, then Plan %+v; without LookAhead Plan %+v",
							name, seed, now.Sub(t0), f, ahead[f], outA[f], outB[f])
					}
				}
			}
		}
	}
}
