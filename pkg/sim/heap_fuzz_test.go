package sim

import (
	"math/rand/v2"
	"testing"
)

// FuzzHeapsPopInOrder interleaves random pushes and pops on the event heap
// and the run queue and checks that every pop returns the smallest pending
// element by (time or key, then push order): the determinism of the engine
// rests on it.
func FuzzHeapsPopInOrder(f *testing.F) {
	for _, s := range []uint64{1, 7, 99} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var h eventHeap
		var q runQueue
		type pending struct {
			at  int64
			seq uint64
		}
		var evs, ws []pending
		for range 500 {
			if rng.IntN(3) > 0 {
				at := int64(rng.IntN(50))
				h.push(at, evDone, 0)
				evs = append(evs, pending{at, h.seq})
				q.push(at, int32(len(ws)))
				ws = append(ws, pending{at, q.seq})
				continue
			}
			if h.len() == 0 {
				continue
			}
			got := h.pop()
			i := smallest(len(evs), func(a, b int) bool {
				return evs[a].at < evs[b].at || (evs[a].at == evs[b].at && evs[a].seq < evs[b].seq)
			})
			if got.at != evs[i].at || got.seq != evs[i].seq {
				t.Fatalf("event heap popped (%d,%d), want (%d,%d)", got.at, got.seq, evs[i].at, evs[i].seq)
			}
			evs = append(evs[:i], evs[i+1:]...)
			r := q.pop()
			j := smallest(len(ws), func(a, b int) bool {
				return ws[a].at < ws[b].at || (ws[a].at == ws[b].at && ws[a].seq < ws[b].seq)
			})
			if ws[r].seq != ws[j].seq || ws[r].at != ws[j].at {
				t.Fatalf("run queue popped request %d, want the one pushed %d-th", r, ws[j].seq)
			}
			ws[r].at = 1 << 62 // popped: never the smallest again
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
