package batch

import (
	"math/rand/v2"
	"testing"
	"time"
)

// FuzzPackerMatchesBruteForce checks, for random queues with releases,
// deadlines and existing backlogs, that every placement goes to the
// lowest-indexed container where a from-scratch recomputation says the
// request meets its deadline, and that the tree's backlogs equal the
// recomputed ones.
func FuzzPackerMatchesBruteForce(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		backlogs := make([]time.Duration, rng.IntN(5))
		for i := range backlogs {
			backlogs[i] = time.Duration(rng.IntN(2000)) * ms
		}
		cold := time.Duration(rng.IntN(1500)) * ms
		items := make([]Item, 1+rng.IntN(40))
		var rel time.Duration
		for i := range items {
			rel += time.Duration(rng.IntN(300)) * ms
			e := time.Duration(1+rng.IntN(900)) * ms
			items[i] = Item{Exec: e, Release: rel, Deadline: rel + time.Duration(rng.IntN(2000))*ms}
		}
		var p Packer
		p.Reset(backlogs, cold, len(items))
		ends := append([]time.Duration(nil), backlogs...)
		for _, it := range items {
			want := -1
			for c, end := range ends {
				if max(end, it.Release)+it.Exec <= it.Deadline {
					want = c
					break
				}
			}
			got := p.Place(it)
			if want == -1 {
				want = len(ends)
				ends = append(ends, cold)
			}
			if got != want {
				t.Fatalf("placed in %d, brute force says %d", got, want)
			}
			ends[got] = max(ends[got], it.Release) + it.Exec
			if p.Backlog(got) != ends[got] {
				t.Fatalf("container %d: tree backlog %v, recomputed %v", got, p.Backlog(got), ends[got])
			}
		}
	})
}
