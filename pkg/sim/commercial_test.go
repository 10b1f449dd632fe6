package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
)

// The newest-first pool always yields the idle container created last,
// whatever idle periods ended meanwhile by other paths.
func TestNewestFirstPoolYieldsTheNewestIdleContainer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 64
	ctrs := make([]container, n)
	p := newIdlePool(4)
	for i := range ctrs {
		ctrs[i] = container{seq: uint64(rng.IntN(1 << 20)), node: int32(rng.IntN(4)), state: csBusy}
	}
	for step := range 5000 {
		id := int32(rng.IntN(n))
		c := &ctrs[id]
		switch {
		case c.state == csBusy:
			c.state = csIdle
			c.idleGen++
			p.push(id, c.node)
			p.compactNewest(ctrs)
			p.pushNewest(id, c.seq, c.idleGen)
			if len(p.newest) > 2*p.len()+65 {
				t.Fatalf("step %d: %d heap entries for %d idle containers", step, len(p.newest), p.len())
			}
		case rng.IntN(3) == 0: // expired or retired: leaves by another path
			p.remove(id, c.node)
			c.state = csBusy
		case p.len() > 0:
			want := int32(-1)
			for i := range ctrs {
				if ctrs[i].state == csIdle && (want < 0 || ctrs[i].seq > ctrs[want].seq) {
					want = int32(i)
				}
			}
			got := p.popNewest(ctrs)
			p.remove(got, ctrs[got].node)
			if ctrs[got].seq != ctrs[want].seq {
				t.Fatalf("step %d: took container %d (seq %d), newest idle is %d (seq %d)", step, got, ctrs[got].seq, want, ctrs[want].seq)
			}
			ctrs[got].state = csBusy
		}
	}
}

// SimFaaS's model: an instance expires exactly its keep-alive after its
// last request. Load that returns after a longer gap finds no warm
// instance and pays cold starts again; after a shorter gap it finds them.
func TestCommercialInstancesExpireAfterTheKeepAlive(t *testing.T) {
	coldStarts := func(gap time.Duration) int64 {
		per := make([]float64, 0, 400)
		for range 30 {
			per = append(per, 20)
		}
		for range int(gap / time.Second) {
			per = append(per, 0)
		}
		for range 30 {
			per = append(per, 20)
		}
		res, err := Run(Config{App: flatApp(200*time.Millisecond, time.Second), Dist: dist(t, "uniform"),
			Trace: trace.Trace{Name: "gap", PerSecond: per}, Policy: "commercial", Seed: 1, ColdBoot: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.ColdStarts
	}
	short, long := coldStarts(policy.CommercialKeepAlive-20*time.Second), coldStarts(policy.CommercialKeepAlive+20*time.Second)
	// About 4 instances are busy on average (20/s x 0.2 s); a cold fleet
	// starts about twice that in its first seconds.
	if long < short+3 {
		t.Errorf("cold starts: %d after a gap shorter than the keep-alive, %d after a longer one", short, long)
	}
}

// M/G/∞: with no queueing, a new instance for every request that finds
// none idle and a negligible cold start, the instances running requests
// are an M/G/∞ system, whose mean is λ·E[S] (Little's law) whatever the
// service distribution; SimFaaS reports the same quantity.
func TestCommercialRunningInstancesMatchMGInfinity(t *testing.T) {
	for _, lambda := range []float64{5, 40} {
		res, err := Run(Config{App: flatApp(250*time.Millisecond, 2*time.Second), Dist: dist(t, "uniform"),
			Trace: constantTrace(lambda, time.Hour), Policy: "commercial", Seed: 7, ColdStart: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		want := lambda * 0.25
		if math.Abs(res.AvgRunning-want) > 0.03*want {
			t.Errorf("λ=%v: mean running %.3f, M/G/∞ %.3f", lambda, res.AvgRunning, want)
		}
		if d := res.AvgContainers - res.AvgRunning - res.AvgIdle; math.Abs(d) > 1e-9 || res.AvgIdle < 0 {
			t.Errorf("λ=%v: total %.3f != running %.3f + idle %.3f", lambda, res.AvgContainers, res.AvgRunning, res.AvgIdle)
		}
		if res.ColdStartProb <= 0 || res.ColdStartProb > 0.05 {
			t.Errorf("λ=%v: cold-start probability %v", lambda, res.ColdStartProb)
		}
	}
}

func TestCommercialIsListedAndDedicated(t *testing.T) {
	if !slices.Contains(policy.Names(), "commercial") || !slices.Contains(policy.Names(), "knative") {
		t.Fatalf("Names %v", policy.Names())
	}
}
