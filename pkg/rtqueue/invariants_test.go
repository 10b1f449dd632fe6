package rtqueue

import (
	"math/rand/v2"
	"testing"
)

// TestRandomOpsKeepQueueInvariants drives the queue with a seeded random
// mix of adds, gets and dones, and after every step checks the invariants
// against a simple model: a key is waiting at most once, never waiting and
// processing at once, Len matches, and Get returns the highest waiting
// priority.
func TestRandomOpsKeepQueueInvariants(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		checkRandomOps(t, seed)
	}
}

func checkRandomOps(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	q := New(Config[int]{})
	defer q.ShutDown()
	processing := map[int]bool{}
	for step := range 2000 {
		k := rng.IntN(12)
		switch op := rng.IntN(3); {
		case op == 0:
			q.AddWithPriority(k, rng.IntN(100))
		case op == 1 && q.Len() > 0:
			top := highestWaiting(q)
			item, prio, _ := q.GetWithPriority()
			if processing[item] {
				t.Fatalf("seed %d step %d: %d handed out while processing", seed, step, item)
			}
			if prio != top {
				t.Fatalf("seed %d step %d: got priority %d, highest waiting was %d", seed, step, prio, top)
			}
			processing[item] = true
		case op == 2 && processing[k]:
			delete(processing, k)
			q.Done(k)
		}
		checkStructure(t, q, processing, seed, step)
	}
}

func highestWaiting(q *Queue[int]) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting.highestAtLeast(0)
}

func checkStructure(t *testing.T, q *Queue[int], processing map[int]bool, seed uint64, step int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	seen := map[int]bool{}
	for p := range numLevels {
		for e := q.waiting.head[p]; e != nil; e = e.next {
			if seen[e.item] || processing[e.item] || q.queued[e.item] != e || e.priority != p {
				t.Fatalf("seed %d step %d: key %d waiting twice, while processing, or misfiled", seed, step, e.item)
			}
			seen[e.item] = true
			n++
		}
	}
	if n != q.waiting.size || n != len(q.queued) || len(q.active) != len(processing) {
		t.Fatalf("seed %d step %d: counted %d waiting, size %d, index %d; active %d vs %d",
			seed, step, n, q.waiting.size, len(q.queued), len(q.active), len(processing))
	}
}
