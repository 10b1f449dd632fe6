package policy

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// truthSpec is a spec every policy, the clairvoyant ones included, builds
// from.
func truthSpec() Spec {
	s := spec(FunctionSpec{Name: "f", SLO: time.Second}, FunctionSpec{Name: "g", SLO: time.Second})
	s.Truth = &Truth{
		Rate:       func(d time.Duration) float64 { return map[bool]float64{true: 2, false: -1}[d < time.Minute] },
		ExecMean:   func(int, float64) time.Duration { return 100 * ms },
		OutputMean: func(_ int, size float64) float64 { return size },
		SampleSize: func(*rand.Rand) float64 { return 10 },
		Planned:    [][]PlanStep{{{At: 0, Live: 1}}, {{At: 0, Live: 1}}},
	}
	return s
}

// CapsFor, read before a policy exists, says what the built policy says,
// and every capability names a hook the policy has.
func TestCapsForMatchesTheBuiltPolicy(t *testing.T) {
	all := Support{Clairvoyant: true, Wakes: true}
	for _, name := range slices.Concat(Names(), Extras(), Ablations(), ChainAblations()) {
		want, err := CapsFor(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := mustNew(t, name, truthSpec())
		if got := p.Caps(); got != want {
			t.Errorf("%s: built %+v, CapsFor %+v", name, got, want)
		}
		if _, err := NewContract(p, all); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := CapsFor("nope"); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("unknown name: %v", err)
	}
}

// A driver without clairvoyance refuses exactly the clairvoyant policies,
// and says why.
func TestContractRefusesWhatTheDriverCannotHonour(t *testing.T) {
	live := Support{}
	for _, name := range slices.Concat(Names(), Extras()) {
		c, _ := CapsFor(name)
		err := c.Refuse(name, live)
		if clairvoyant := name == "oracle" || name == "oracle-predicted"; clairvoyant != (err != nil) {
			t.Errorf("%s: refused %v", name, err)
		}
		if err != nil && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v is not ErrUnsupported", name, err)
		}
	}
	_, err := NewContract(mustNew(t, "oracle", truthSpec()), live)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("oracle bound live: %v", err)
	}
}

// Apply retires first, keeps the floor, stops at the ceiling and strands
// no request.
func TestApplyClampsAndStrandsNothing(t *testing.T) {
	for _, tc := range []struct {
		name        string
		d           Decision
		s           Scale
		add, retire int
	}{
		{"as decided", Decision{Add: 2}, Scale{Live: 1}, 2, 0},
		{"retire only idle", Decision{Retire: 5}, Scale{Live: 4, Idle: 2}, 0, 2},
		{"retire keeps MinScale", Decision{Retire: 5}, Scale{Live: 4, Idle: 4, MinScale: 3}, 0, 1},
		{"floor restored", Decision{}, Scale{Live: 1, MinScale: 3}, 2, 0},
		{"ceiling", Decision{Add: 9}, Scale{Live: 2, MaxScale: 5}, 3, 0},
		{"above ceiling already", Decision{Add: 1}, Scale{Live: 6, MaxScale: 5}, 0, 0},
		{"stranded request", Decision{}, Scale{Queued: 1}, 1, 0},
		{"stranded after retire", Decision{Retire: 1}, Scale{Live: 1, Idle: 1, Queued: 2}, 1, 1},
		{"nothing queued, nothing kept", Decision{Retire: 1}, Scale{Live: 1, Idle: 1}, 0, 1},
	} {
		add, retire, err := Apply(tc.d, tc.s)
		if err != nil || add != tc.add || retire != tc.retire {
			t.Errorf("%s: add %d retire %d (%v), want %d %d", tc.name, add, retire, err, tc.add, tc.retire)
		}
	}
	if _, _, err := Apply(Decision{Add: -1}, Scale{}); !errors.Is(err, ErrBadSpec) {
		t.Errorf("negative decision: %v", err)
	}
}

// Admission: the run order is never overtaken, a dedicated policy starts
// an instance of the request's own, and a full queue refuses.
func TestAdmit(t *testing.T) {
	shared := &Contract{}
	own := &Contract{Caps: Caps{Dedicated: true}}
	for _, tc := range []struct {
		c    *Contract
		a    Arrival
		want Admission
	}{
		{shared, Arrival{Free: true, MaxQueue: 1}, RunNow},
		{shared, Arrival{Queued: 1, Free: true, MaxQueue: 5}, Enqueue},
		{shared, Arrival{Queued: 5, MaxQueue: 5}, Refuse},
		{own, Arrival{Free: true, MaxQueue: 1}, RunNow},
		{own, Arrival{Queued: 5, MaxQueue: 5}, StartOwn},
	} {
		if got := tc.c.Admit(tc.a); got != tc.want {
			t.Errorf("dedicated %v, %+v: %v, want %v", tc.c.Caps.Dedicated, tc.a, got, tc.want)
		}
	}
}

func TestIdleChoiceAndRetireOrder(t *testing.T) {
	def, newest := &Contract{}, &Contract{Caps: Caps{Instances: Instances{NewestFirst: true}}}
	a := Idle{Created: 1, FreedSeq: 9, Node: 0}
	b := Idle{Created: 2, FreedSeq: 3, Node: 0}
	c := Idle{Created: 3, FreedSeq: 10, Node: 1}
	if !def.TakesBefore(a, b) || !def.TakesBefore(b, c) || def.TakesBefore(c, a) {
		t.Error("default: the lowest node's most recently freed takes the request")
	}
	if !newest.TakesBefore(c, a) || !newest.TakesBefore(b, a) {
		t.Error("NewestFirst: the newest takes the request")
	}
	if !RetiresBefore(c, a) || !RetiresBefore(b, a) || RetiresBefore(a, b) {
		t.Error("retire: the highest node's longest idle first")
	}
}

func TestSplitSLO(t *testing.T) {
	share, cum := SplitSLO(time.Second, []float64{1, 3})
	if share[0] != 250*ms || share[1] != 750*ms || cum[1] != time.Second {
		t.Errorf("proportional: %v %v", share, cum)
	}
	share, _ = SplitSLO(time.Second, []float64{0, 0})
	if share[0] != 500*ms || share[1] != 500*ms {
		t.Errorf("no weights: %v", share)
	}
	share, _ = SplitSLO(time.Second, []float64{1e-9, 1})
	if share[0] != ms {
		t.Errorf("floor: %v", share)
	}
}

func TestColdStartEstimate(t *testing.T) {
	e := NewColdStartEstimate(time.Second)
	e.Observe(0)
	if e.Value() != time.Second {
		t.Fatalf("a non-measurement moved it: %v", e.Value())
	}
	e.Observe(100 * ms)
	if e.Value() != 100*ms {
		t.Fatalf("first measurement replaces the declaration: %v", e.Value())
	}
	e.Observe(200 * ms)
	if e.Value() != 130*ms {
		t.Fatalf("moving average: %v", e.Value())
	}
}

func TestLookAheadDueOncePerGapAtTheHead(t *testing.T) {
	c, err := NewContract(mustNew(t, "cypress", truthSpec()), Support{})
	if err != nil {
		t.Fatal(err)
	}
	if c.LookAheadDue(t0, 1, 2) || c.LookAheadDue(t0, 0, 1) {
		t.Error("due downstream or on a lone function")
	}
	if !c.LookAheadDue(t0, 0, 2) || c.LookAheadDue(t0.Add(LookAheadGap-1), 0, 2) || !c.LookAheadDue(t0.Add(LookAheadGap), 0, 2) {
		t.Error("not once per gap")
	}
	k, _ := NewContract(mustNew(t, "knative", truthSpec()), Support{})
	if k.LookAheadDue(t0, 0, 2) {
		t.Error("knative looks ahead")
	}
}

func TestCapacityOrders(t *testing.T) {
	if !GrantsBefore(Claim{Criticality: 2}, Claim{Criticality: 1, Queued: 9}) || !GrantsBefore(Claim{Queued: 3}, Claim{Queued: 2}) {
		t.Error("grants: the more critical first, then the longer queue")
	}
	if !Preempts(2, 1) || Preempts(1, 1) {
		t.Error("only a more critical function preempts")
	}
	old, young := Idle{FreedSeq: 1}, Idle{FreedSeq: 5}
	if !YieldsBefore(Yielder{Criticality: 0, Idle: young}, Yielder{Criticality: 1, Idle: old}) ||
		!YieldsBefore(Yielder{Idle: old}, Yielder{Idle: young}) {
		t.Error("victims: the least critical first, then the longest idle")
	}
}
