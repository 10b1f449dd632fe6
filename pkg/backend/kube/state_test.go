package kube

import (
	"errors"
	"slices"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestState() *fnState { return newFnState(stack.Function{Name: "fn", Image: "img"}) }

// kinds summarises events as "ready:POD", "failed", "exited:POD" and
// "crashed:POD" (an exit with an error), in order.
func kinds(evs []event) []string {
	var out []string
	for _, e := range evs {
		switch {
		case e.kind == evReady:
			out = append(out, "ready:"+e.inst.ID)
		case e.kind == evFailed:
			out = append(out, "failed")
		case e.err == nil:
			out = append(out, "exited:"+e.inst.ID)
		default:
			out = append(out, "crashed:"+e.inst.ID)
		}
	}
	return out
}

func wantEvents(t *testing.T, got []event, want ...string) {
	t.Helper()
	if k := kinds(got); !slices.Equal(k, want) {
		t.Fatalf("events %v, want %v", k, want)
	}
}

func TestNewEndpointsAnswerPendingStartsOldestFirst(t *testing.T) {
	s := newTestState()
	wantEvents(t, s.start(1, t0))
	wantEvents(t, s.start(1, t0.Add(time.Second)))
	evs := s.observe(map[string]string{"p-b": "10.0.0.2:8080", "p-a": "10.0.0.1:8080"}, t0.Add(3*time.Second))
	wantEvents(t, evs, "ready:p-a", "ready:p-b")
	if evs[0].inst.ColdStart != 3*time.Second || evs[1].inst.ColdStart != 2*time.Second {
		t.Errorf("cold starts %v and %v, want 3s (oldest start) and 2s", evs[0].inst.ColdStart, evs[1].inst.ColdStart)
	}
	if evs[0].inst.Addr != "10.0.0.1:8080" || evs[0].inst.Function != "fn" {
		t.Errorf("instance %+v, want fn at 10.0.0.1:8080", evs[0].inst)
	}
	if s.target() != 2 {
		t.Errorf("target %d, want 2", s.target())
	}
}

// The dispatcher counts pending starts: n starts must end in exactly n
// Ready-or-Failed events, whatever the endpoints do.
func TestEveryStartEndsInExactlyOneReadyOrFailed(t *testing.T) {
	s := newTestState()
	s.start(3, t0)
	evs := s.observe(map[string]string{"p-a": "10.0.0.1:8080"}, t0.Add(time.Second))
	// The same endpoint seen again answers nothing more.
	evs = append(evs, s.observe(map[string]string{"p-a": "10.0.0.1:8080"}, t0.Add(2*time.Second))...)
	evs = append(evs, s.expire(t0, time.Minute)...)
	wantEvents(t, evs, "ready:p-a", "failed", "failed")
	for _, e := range evs[1:] {
		if !errors.Is(e.err, ErrStartTimeout) {
			t.Errorf("failure %v, want ErrStartTimeout", e.err)
		}
	}
	// A late endpoint after the timeout is a spare, not a second answer.
	wantEvents(t, s.observe(map[string]string{"p-a": "10.0.0.1:8080", "p-b": "10.0.0.2:8080"}, t0.Add(time.Hour)))
	if s.target() != 1 {
		t.Errorf("target %d, want 1: failed starts must leave the replica count", s.target())
	}
}

func TestExpireKeepsStartsWithinTheTimeout(t *testing.T) {
	s := newTestState()
	s.start(1, t0)
	s.start(1, t0.Add(10*time.Second))
	wantEvents(t, s.expire(t0.Add(5*time.Second), time.Minute), "failed")
	if len(s.pending) != 1 {
		t.Errorf("%d pending, want the later start kept", len(s.pending))
	}
}

func TestSparesAnswerLaterStartsAtOnce(t *testing.T) {
	s := newTestState()
	// A restarted gateway finds ready pods nobody asked for.
	wantEvents(t, s.observe(map[string]string{"old": "10.0.0.9:8080"}, t0))
	if s.target() != 0 {
		t.Fatalf("target %d, want 0: spares are not counted", s.target())
	}
	evs := s.start(2, t0.Add(time.Second))
	wantEvents(t, evs, "ready:old")
	if evs[0].inst.ColdStart != 0 {
		t.Errorf("cold start %v, want 0 for a spare", evs[0].inst.ColdStart)
	}
	if s.target() != 2 {
		t.Errorf("target %d, want 2 (one ready, one pending)", s.target())
	}
}

func TestVanishedEndpointIsACrashAndAStoppedOneAnExit(t *testing.T) {
	s := newTestState()
	s.start(2, t0)
	evs := s.observe(map[string]string{"a": "10.0.0.1:8080", "b": "10.0.0.2:8080"}, t0)
	if !s.stop(evs[0].inst, t0) {
		t.Fatal("stop of a reported instance reported unknown")
	}
	if s.target() != 1 {
		t.Fatalf("target %d after stop, want 1", s.target())
	}
	if r := s.takeRetire(); len(r) != 1 || r[0] != (retirement{pod: "a"}) {
		t.Fatalf("retire %+v, want pod a", r)
	}
	evs = s.observe(map[string]string{}, t0.Add(time.Second))
	wantEvents(t, evs, "crashed:b", "exited:a")
	if !errors.Is(evs[0].err, ErrEndpointGone) {
		t.Errorf("crash error %v, want ErrEndpointGone", evs[0].err)
	}
	if s.target() != 0 {
		t.Errorf("target %d, want 0", s.target())
	}
	if s.stop(evs[1].inst, t0) {
		t.Error("stopping an exited instance again reported it known")
	}
}

func TestNotReadyThenReadyAgainIsASpare(t *testing.T) {
	s := newTestState()
	s.start(1, t0)
	s.observe(map[string]string{"a": "10.0.0.1:8080"}, t0)
	wantEvents(t, s.observe(map[string]string{}, t0), "crashed:a")
	wantEvents(t, s.observe(map[string]string{"a": "10.0.0.1:8080"}, t0))
	wantEvents(t, s.start(1, t0), "ready:a")
}

func TestAddressChangeIsANewInstance(t *testing.T) {
	s := newTestState()
	s.start(1, t0)
	s.observe(map[string]string{"a": "10.0.0.1:8080"}, t0)
	wantEvents(t, s.observe(map[string]string{"a": "10.0.0.7:8080"}, t0), "crashed:a")
}

func TestStoppingPodIsNeverClaimed(t *testing.T) {
	s := newTestState()
	s.start(1, t0)
	evs := s.observe(map[string]string{"a": "10.0.0.1:8080"}, t0)
	s.stop(evs[0].inst, t0)
	wantEvents(t, s.start(1, t0))
	wantEvents(t, s.observe(map[string]string{"a": "10.0.0.1:8080", "b": "10.0.0.2:8080"}, t0), "ready:b")
}

func TestOverdueForcesDeleteOnce(t *testing.T) {
	s := newTestState()
	s.start(1, t0)
	evs := s.observe(map[string]string{"a": "10.0.0.1:8080"}, t0)
	s.stop(evs[0].inst, t0)
	s.takeRetire()
	if s.overdue(t0.Add(time.Second), time.Minute) {
		t.Fatal("overdue before the grace")
	}
	if !s.overdue(t0.Add(time.Minute), time.Minute) {
		t.Fatal("not overdue after the grace")
	}
	if r := s.takeRetire(); len(r) != 1 || r[0] != (retirement{pod: "a", force: true}) {
		t.Fatalf("retire %+v, want a forced delete of a", r)
	}
	if s.overdue(t0.Add(time.Hour), time.Minute) {
		t.Error("a second forced delete for the same pod")
	}
}

func TestRequeuedRetirementsGoFirst(t *testing.T) {
	s := newTestState()
	s.retire = []retirement{{pod: "later"}}
	s.requeue([]retirement{{pod: "first"}})
	if r := s.takeRetire(); len(r) != 2 || r[0].pod != "first" {
		t.Errorf("retire %+v, want first then later", r)
	}
}

func TestForgetEndsEverything(t *testing.T) {
	s := newTestState()
	s.start(3, t0)
	evs := s.observe(map[string]string{"a": "10.0.0.1:8080", "b": "10.0.0.2:8080"}, t0)
	s.stop(evs[0].inst, t0)
	evs = s.forget(ErrClosed)
	wantEvents(t, evs, "failed", "exited:b", "exited:a")
	if !errors.Is(evs[0].err, ErrClosed) {
		t.Errorf("failure %v, want ErrClosed", evs[0].err)
	}
	if s.target() != 0 || len(s.takeRetire()) != 0 {
		t.Errorf("target %d after forget, want 0 and nothing to retire", s.target())
	}
}

// The declared minimum is a floor: the dispatcher keeps that many live, so
// a crashed pod's replacement should already be coming.
func TestTargetNeverGoesBelowTheMinimum(t *testing.T) {
	s := newTestState()
	s.decl.MinScale = 2
	if s.target() != 2 {
		t.Fatalf("target %d with nothing live, want the minimum 2", s.target())
	}
	s.start(3, t0)
	if s.target() != 3 {
		t.Errorf("target %d with 3 pending, want 3", s.target())
	}
	s.expire(t0, time.Minute)
	if s.target() != 2 {
		t.Errorf("target %d after the starts failed, want the minimum 2", s.target())
	}
}

func newFollowState() *fnState {
	s := newTestState()
	s.follow = true
	return s
}

// A follower asked for nothing, yet must route to every pod the leader
// runs: each routable endpoint is an instance as soon as it is seen.
func TestFollowerAdoptsEveryRoutableEndpoint(t *testing.T) {
	s := newFollowState()
	evs := s.observe(map[string]string{"b": "10.0.0.2:8080", "a": "10.0.0.1:8080"}, t0.Add(time.Minute))
	wantEvents(t, evs, "ready:a", "ready:b")
	for _, e := range evs {
		if e.inst.ColdStart != 0 || e.inst.Function != "fn" {
			t.Errorf("instance %+v, want fn with no cold start: no start of this replica's is behind it", e.inst)
		}
	}
	if len(s.reported) != 2 {
		t.Errorf("%d reported, want both adopted instances", len(s.reported))
	}
	// Seen again, they are the same instances.
	wantEvents(t, s.observe(map[string]string{"a": "10.0.0.1:8080", "b": "10.0.0.2:8080"}, t0.Add(2*time.Minute)))
}

// In follow mode the leader retired the pod: its going is no failure.
func TestFollowerReportsAVanishedEndpointAsACleanExit(t *testing.T) {
	s := newFollowState()
	s.observe(map[string]string{"a": "10.0.0.1:8080", "b": "10.0.0.2:8080"}, t0)
	wantEvents(t, s.observe(map[string]string{"b": "10.0.0.2:8080"}, t0), "exited:a")
	// An address change is the old instance leaving and a new one coming.
	wantEvents(t, s.observe(map[string]string{"b": "10.0.0.7:8080"}, t0), "exited:b", "ready:b")
	if s.reported["b"].Addr != "10.0.0.7:8080" {
		t.Errorf("instance %+v, want the new address", s.reported["b"])
	}
}

func TestFollowerFailsStartsAndIgnoresStops(t *testing.T) {
	s := newFollowState()
	evs := s.observe(map[string]string{"a": "10.0.0.1:8080"}, t0)
	starts := s.start(2, t0)
	wantEvents(t, starts, "failed", "failed")
	for _, e := range starts {
		if !errors.Is(e.err, ErrFollower) || e.function != "fn" {
			t.Errorf("failure %q: %v, want ErrFollower", e.function, e.err)
		}
	}
	if len(s.pending) != 0 {
		t.Errorf("%d pending after a follower's failed starts, want none", len(s.pending))
	}
	if s.stop(evs[0].inst, t0) {
		t.Error("a follower's stop reported work for the worker")
	}
	if _, ok := s.reported["a"]; !ok || len(s.stopping) != 0 || len(s.takeRetire()) != 0 {
		t.Errorf("after a follower's stop: reported %v, stopping %v; want it still reported and nothing retired", s.reported, s.stopping)
	}
}

// After the switch the adopted instances are the new leader's to count
// and stop, and the rules are the leader's: new endpoints are spares, and
// an instance that goes on its own is a crash.
func TestLeadKeepsAdoptedInstancesAndMakesNewEndpointsSpares(t *testing.T) {
	s := newFollowState()
	s.decl.MinScale = 1
	s.observe(map[string]string{"a": "10.0.0.1:8080", "b": "10.0.0.2:8080"}, t0)
	s.lead()
	if s.target() != 2 {
		t.Fatalf("target %d after lead, want the 2 adopted instances", s.target())
	}
	wantEvents(t, s.observe(map[string]string{"a": "10.0.0.1:8080", "b": "10.0.0.2:8080", "c": "10.0.0.3:8080"}, t0))
	if s.target() != 2 {
		t.Errorf("target %d with a spare, want 2: spares are not counted", s.target())
	}
	wantEvents(t, s.start(1, t0), "ready:c")
	evs := s.observe(map[string]string{"b": "10.0.0.2:8080", "c": "10.0.0.3:8080"}, t0)
	wantEvents(t, evs, "crashed:a")
	if !errors.Is(evs[0].err, ErrEndpointGone) {
		t.Errorf("crash error %v, want ErrEndpointGone", evs[0].err)
	}
	if !s.stop(s.reported["b"], t0) {
		t.Error("stop of an adopted instance after lead reported it unknown")
	}
	if r := s.takeRetire(); len(r) != 1 || r[0].pod != "b" {
		t.Errorf("retire %+v, want pod b", r)
	}
}
