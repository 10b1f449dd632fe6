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
	ops := make([]byte, 3*2000)
	for i := range ops {
		ops[i] = byte(rng.IntN(256))
	}
	checkOps(t, ops, seed)
}

// FuzzQueueInvariants lets the fuzzer choose the operations: each three
// bytes are an operation, a key and a priority.
func FuzzQueueInvariants(f *testing.F) {
	f.Add([]byte{0, 1, 50, 1, 0, 0, 0, 1, 90, 2, 1, 0})
	f.Add([]byte{0, 3, 10, 0, 3, 99, 1, 0, 0, 0, 3, 5, 2, 3, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) { checkOps(t, ops, 0) })
}

func checkOps(t *testing.T, ops []byte, seed uint64) {
	q := New(Config[int]{})
	defer q.ShutDown()
	processing := map[int]bool{}
	for step := 0; step+2 < len(ops); step += 3 {
		k := int(ops[step+1]) % 12
		switch op := int(ops[step]) % 3; {
		case op == 0:
			q.AddWithPriority(k, int(ops[step+2])%100)
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
