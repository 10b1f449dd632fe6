package bound

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The busy set answers like a sorted slice: the first to free, and the
// last to free by a limit, after random inserts and removals.
func TestFreesAgreesWithASortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := newFrees()
	type kv struct {
		free int64
		id   int32
	}
	var ref []kv // kept sorted
	cmp := func(a, b kv) int {
		if a.free != b.free {
			return int(a.free - b.free)
		}
		return int(a.id - b.id)
	}
	for i := range 5000 {
		if len(ref) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(ref))
			tr.Remove(ref[k].free, ref[k].id)
			ref = slices.Delete(ref, k, k+1)
		} else {
			x := kv{rng.Int64N(500), int32(i)}
			tr.Insert(x.free, x.id)
			at, _ := slices.BinarySearchFunc(ref, x, cmp)
			ref = slices.Insert(ref, at, x)
		}
		if tr.Len() != len(ref) {
			t.Fatalf("step %d: %d entries, want %d", i, tr.Len(), len(ref))
		}
		f, id, ok := tr.Min()
		if ok != (len(ref) > 0) || (ok && (f != ref[0].free || id != ref[0].id)) {
			t.Fatalf("step %d: min (%d,%d,%v), want %v", i, f, id, ok, ref[:min(1, len(ref))])
		}
		limit := rng.Int64N(520) - 10
		f, id, ok = tr.LastBy(limit)
		k := len(ref) - 1
		for k >= 0 && ref[k].free > limit {
			k--
		}
		if ok != (k >= 0) || (ok && (f != ref[k].free || id != ref[k].id)) {
			t.Fatalf("step %d: last by %d (%d,%d,%v), want index %d", i, limit, f, id, ok, k)
		}
	}
}

// sinkLog records a plan's container changes.
type sinkLog struct {
	starts  []int64
	retires map[int32]int64
}

func (s *sinkLog) Start(_ int32, _ int, at int64, _ bool) { s.starts = append(s.starts, at) }
func (s *sinkLog) Retire(c int32, at int64, _ int32) {
	if s.retires == nil {
		s.retires = map[int32]int64{}
	}
	s.retires[c] = at
}

// Best fit waits on the busy container that frees last while still
// meeting the deadline; first fit on the one that frees first.
func TestBestFitWaitsOnTheLatestContainerThatStillFits(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, firstFit := range []bool{false, true} {
		var log sinkLog
		p := NewPlanner(1, 100*ms, []int{3}, 0, 0, &log)
		p.FirstFit = firstFit
		// Three warm containers busy until 500, 300 and 100 ms (the idle
		// container freed last goes first, the newest id).
		for _, e := range []int64{100, 300, 500} {
			if c, _, _, ok := p.Place(0, Job{Release: 0, Deadline: 1000 * ms, Exec: e * ms}); !ok || c > 2 {
				t.Fatalf("job on %d, ok %v", c, ok)
			}
		}
		// Released at 50 ms, 200 ms long, due at 550 ms: it fits after
		// the containers freeing at 100 and 300 ms, not at 500.
		c, seq, end, ok := p.Place(0, Job{Release: 50 * ms, Deadline: 550 * ms, Exec: 200 * ms})
		want, wantEnd := int32(1), 500*ms // best fit: the one freeing at 300 ms
		if firstFit {
			want, wantEnd = 2, 300*ms
		}
		if !ok || c != want || seq != 1 || end != wantEnd {
			t.Errorf("first fit %v: container %d, seq %d, end %v; want %d, 1, %v", firstFit, c, seq, time.Duration(end), want, time.Duration(wantEnd))
		}
		// Due before any busy container frees in time: a new container,
		// started at time 0 (it could not start a cold start before its
		// release), so the job waits for it to be ready.
		c, _, end, _ = p.Place(0, Job{Release: 60 * ms, Deadline: 100 * ms, Exec: 30 * ms})
		if c != 3 || end != 130*ms || len(log.starts) != 4 || log.starts[3] != 0 {
			t.Errorf("new container %d ending %v, starts %v", c, time.Duration(end), log.starts)
		}
		p.Finish()
		if len(log.retires) != 4 {
			t.Errorf("%d containers retired, want 4", len(log.retires))
		}
	}
}

// A room caps the live containers: past it a job waits, late, on the
// container that frees first.
func TestPlannerKeepsWithinItsRoom(t *testing.T) {
	const ms = int64(time.Millisecond)
	var log sinkLog
	p := NewPlanner(1, 100*ms, []int{0}, 2, 0, &log)
	for i := range 5 {
		r := int64(1000+i) * ms
		if _, _, _, ok := p.Place(0, Job{Release: r, Deadline: r + 50*ms, Exec: 40 * ms}); !ok {
			t.Fatalf("job %d refused", i)
		}
	}
	if len(log.starts) != 2 {
		t.Errorf("%d containers started in a room of 2", len(log.starts))
	}
}
