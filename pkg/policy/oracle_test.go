package policy

import (
	"errors"
	"testing"
	"time"
)

// The oracle holds exactly its plan's containers at every instant it is
// asked, retires only idle ones, and wakes at each change of the plan.
func TestOracleFollowsItsPlanAndWakesAtEachChange(t *testing.T) {
	s := spec(FunctionSpec{Name: "f", SLO: time.Second}, FunctionSpec{Name: "g", SLO: time.Second})
	s.Truth = &Truth{Planned: [][]PlanStep{
		{{At: 0, Live: 3}, {At: 2 * time.Second, Live: 5}, {At: 4 * time.Second, Live: 1}},
		{{At: time.Second, Live: 2}, {At: 3 * time.Second, Live: 0}},
	}}
	p, err := New("oracle", s)
	if err != nil {
		t.Fatal(err)
	}
	w := p.(Waker)
	at := func(d time.Duration) time.Time { return s.Start.Add(d) }
	out := make([]Decision, 2)
	views := []View{{Counts: Counts{Live: 3, Idle: 3}}, {}}
	p.Plan(at(0), views, out)
	if out[0] != (Decision{}) || out[1] != (Decision{}) {
		t.Fatalf("at 0: %+v", out)
	}
	if next, ok := w.NextWake(at(0)); !ok || !next.Equal(at(time.Second)) {
		t.Fatalf("next wake %v %v, want 1s", next, ok)
	}
	p.Plan(at(2500*time.Millisecond), []View{{Counts: Counts{Live: 3, Idle: 1}}, {Counts: Counts{Live: 2}}}, out)
	if out[0].Add != 2 || out[1] != (Decision{}) {
		t.Fatalf("at 2.5s: %+v", out)
	}
	// At 4 s the plan wants 1 of 5, but only 2 are idle.
	p.Plan(at(4*time.Second), []View{{Counts: Counts{Live: 5, Idle: 2}}, {Counts: Counts{Live: 2, Idle: 2}}}, out)
	if out[0] != (Decision{Retire: 2}) || out[1] != (Decision{Retire: 2}) {
		t.Fatalf("at 4s: %+v", out)
	}
	if _, ok := w.NextWake(at(4 * time.Second)); ok {
		t.Fatal("a wake after the plan's last change")
	}
	if err := p.Complete(0, -1, time.Millisecond, 1); err == nil {
		t.Error("accepted a negative size")
	}
	s.Truth.Planned = s.Truth.Planned[:1]
	if _, err := New("oracle", s); !errors.Is(err, ErrBadSpec) {
		t.Errorf("a plan for one function of two: %v", err)
	}
}
