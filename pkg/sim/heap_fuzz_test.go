package sim

import (
	"math/rand/v2"
	"testing"
)

// FuzzEventHeapPopsInOrder interleaves random pushes and pops on the event
// heap and checks that every pop returns the earliest pending event by
// (time, then push order): the determinism of the engine rests on it. The
// run queue's counterpart is policy.FuzzRunQueuePopsInOrder.
func FuzzEventHeapPopsInOrder(f *testing.F) {
	for _, s := range []uint64{1, 7, 99} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var h eventHeap
		type pending struct {
			at  int64
			seq uint64
		}
		var evs []pending
		for range 500 {
			if rng.IntN(3) > 0 {
				// At most one arrival is pending, as in the engine; it
				// waits beside the heap.
				kind := evDone
				if !h.hasArr && rng.IntN(4) == 0 {
					kind = evArrival
				}
				at := int64(rng.IntN(50))
				h.push(at, kind, 0)
				evs = append(evs, pending{at, h.seq})
				continue
			}
			if h.len() == 0 {
				continue
			}
			first := h.firstAt()
			got := h.pop()
			if got.at != first {
				t.Fatalf("firstAt said %d, pop returned %d", first, got.at)
			}
			i := smallest(len(evs), func(a, b int) bool {
				return evs[a].at < evs[b].at || (evs[a].at == evs[b].at && evs[a].seq < evs[b].seq)
			})
			if got.at != evs[i].at || got.seq != evs[i].seq {
				t.Fatalf("event heap popped (%d,%d), want (%d,%d)", got.at, got.seq, evs[i].at, evs[i].seq)
			}
			evs = append(evs[:i], evs[i+1:]...)
		}
	})
}

func smallest(n int, less func(a, b int) bool) int {
	best := 0
	for i := 1; i < n; i++ {
		if less(i, best) {
			best = i
		}
	}
	return best
}
