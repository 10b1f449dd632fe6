package batch

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

// randomQueue draws n items whose execution times follow the shape of the
// paper's apps: 40-1000 ms against an SLO 1.2x the heaviest.
func randomQueue(rng *rand.Rand, n int, slo time.Duration) []Item {
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{Exec: time.Duration(40+rng.IntN(960)) * ms, Deadline: slo}
	}
	return items
}

// completion recomputes, from scratch, when each container's last request
// finishes: the brute-force check of a placement.
func completion(backlogs []time.Duration, newBacklog time.Duration, assign [][]Item) []time.Duration {
	out := make([]time.Duration, len(assign))
	for c, items := range assign {
		t := newBacklog
		if c < len(backlogs) {
			t = backlogs[c]
		}
		for _, it := range items {
			t += it.Exec
		}
		out[c] = t
	}
	return out
}

// Cypress section 4 (IS Batching): a request joins a container only if its
// completion time stays within the SLO; a new container opens only when no
// container can take it. Every choice is checked against a brute-force
// recomputation over all containers.
func TestFirstFitNeverPlacesPastTheSLOAndMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var p Packer
	for trial := range 500 {
		slo := 1200 * ms
		backlogs := make([]time.Duration, rng.IntN(4))
		for i := range backlogs {
			backlogs[i] = time.Duration(rng.IntN(1500)) * ms
		}
		cold := time.Duration(rng.IntN(300)) * ms
		items := randomQueue(rng, 1+rng.IntN(12), slo)
		p.Reset(backlogs, cold, len(items))
		assign := make([][]Item, len(backlogs)+len(items))
		opened := 0
		for _, it := range items {
			done := completion(backlogs, cold, assign)
			want := -1
			for c := range len(backlogs) + opened {
				if done[c]+it.Exec <= it.Deadline {
					want = c
					break
				}
			}
			got := p.Place(it)
			if want == -1 {
				want = len(backlogs) + opened
				opened++
			}
			if got != want {
				t.Fatalf("trial %d: placed in %d, brute force says %d", trial, got, want)
			}
			assign[got] = append(assign[got], it)
			if c := completion(backlogs, cold, assign)[got]; c > it.Deadline && got < len(backlogs)+opened-1 {
				t.Fatalf("trial %d: container %d now finishes at %v past the %v SLO", trial, got, c, it.Deadline)
			}
			if p.Backlog(got) != completion(backlogs, cold, assign)[got] {
				t.Fatalf("trial %d: tree backlog %v != recomputed", trial, p.Backlog(got))
			}
		}
	}
}

// First fit is a heuristic: on small queues it never beats an exhaustive
// search for the fewest containers, and stays within the 1.7·OPT+1 bound.
func TestFirstFitAgainstExhaustiveOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	var p Packer
	for range 300 {
		slo := 1200 * ms
		items := randomQueue(rng, 1+rng.IntN(7), slo)
		ff := FirstFit(&p, items)
		opt := optimum(items, slo)
		if ff < opt || float64(ff) > 1.7*float64(opt)+1 {
			t.Fatalf("first fit %d containers, optimum %d, items %v", ff, opt, items)
		}
	}
}

// optimum tries every assignment of items to containers.
func optimum(items []Item, slo time.Duration) int {
	best := len(items)
	loads := make([]time.Duration, 0, len(items))
	var rec func(i int)
	rec = func(i int) {
		if len(loads) >= best {
			return
		}
		if i == len(items) {
			best = len(loads)
			return
		}
		for c := range loads {
			if loads[c]+items[i].Exec <= slo {
				loads[c] += items[i].Exec
				rec(i + 1)
				loads[c] -= items[i].Exec
			}
		}
		loads = append(loads, items[i].Exec)
		rec(i + 1)
		loads = loads[:len(loads)-1]
	}
	rec(0)
	return best
}

// Cypress section 4 (IS Reordering): heaviest-first turns first fit into
// first-fit decreasing, which never needs more containers than first fit on
// the same queue.
func TestFirstFitDecreasingNeverUsesMoreContainersThanFirstFit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	var p Packer
	for trial := range 3000 {
		items := randomQueue(rng, 1+rng.IntN(300), 1200*ms)
		ff := FirstFit(&p, items)
		sorted := slices.Clone(items)
		SortDecreasing(sorted)
		if ffd := FirstFit(&p, sorted); ffd > ff {
			t.Fatalf("trial %d: FFD %d containers > FF %d", trial, ffd, ff)
		}
	}
}

// Cypress section 2: with input-size-independent execution times, IS
// batching degenerates to static batching.
func TestConstantExecutionTimeMakesISBatchingEqualStaticBatching(t *testing.T) {
	var p Packer
	for _, exec := range []time.Duration{7 * ms, 100 * ms, 333 * ms, 600 * ms, 1200 * ms, 2 * time.Second} {
		for _, n := range []int{1, 2, 3, 10, 97, 1000} {
			slo := 1200 * ms
			items := make([]Item, n)
			for i := range items {
				items[i] = Item{Exec: exec, Deadline: slo}
			}
			if ff, st := FirstFit(&p, items), Static(n, slo, exec); ff != st {
				t.Errorf("exec %v, n %d: IS batching %d, static %d", exec, n, ff, st)
			}
		}
	}
}

func TestPlaceRespectsCapacity(t *testing.T) {
	var p Packer
	p.Reset([]time.Duration{time.Second}, 0, 1)
	if c := p.Place(Item{Exec: 500 * ms, Deadline: time.Second}); c != 1 {
		t.Fatalf("first overflow went to %d, want new container 1", c)
	}
	if c := p.Place(Item{Exec: 600 * ms, Deadline: time.Second}); c != -1 {
		t.Fatalf("placed past capacity in %d", c)
	}
	if p.Opened() != 1 {
		t.Fatalf("opened %d", p.Opened())
	}
}

func BenchmarkFirstFit1000(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	items := randomQueue(rng, 1000, 1200*ms)
	var p Packer
	for b.Loop() {
		FirstFit(&p, items)
	}
}

// A stream of requests, each arriving after the previous one finished,
// needs a single container; packed as a standing queue it would need one
// per request.
func TestReleaseTimesLetOneContainerServeASpacedStream(t *testing.T) {
	var p Packer
	items := make([]Item, 10)
	for i := range items {
		rel := time.Duration(i) * 500 * ms
		items[i] = Item{Exec: 400 * ms, Release: rel, Deadline: rel + 480*ms}
	}
	if n := FirstFit(&p, items); n != 1 {
		t.Fatalf("spaced stream used %d containers, want 1", n)
	}
	for i := range items {
		items[i].Release = 0
		items[i].Deadline = 480 * ms
	}
	if n := FirstFit(&p, items); n != 10 {
		t.Fatalf("standing queue used %d containers, want 10", n)
	}
}
