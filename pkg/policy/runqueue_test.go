package policy

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// popAll drains q at time now and returns the values in the order Pop gave.
func popAll[T any](q *RunQueue[T], now int64) []T {
	var out []T
	for {
		v, _, ok := q.Pop(now)
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

func values[T any](qs []Queued[T]) []T {
	out := make([]T, len(qs))
	for i, q := range qs {
		out[i] = q.Value
	}
	return out
}

func TestRunQueueFIFORunsInOrderOfEnqueueIgnoringPredictions(t *testing.T) {
	q := NewRunQueue[string](FIFO, 0)
	q.Push(Entry{Enq: 30, Pred: 1}, "c")
	q.Push(Entry{Enq: 10, Pred: 900}, "a")
	q.Push(Entry{Enq: 20, Deadline: 21}, "b1")
	q.Push(Entry{Enq: 20, Pred: 5}, "b2") // same Enq: push order
	if got, want := popAll(q, 1000), []string{"a", "b1", "b2", "c"}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

// Cypress's IS Reordering runs heaviest first among the requests that
// arrived in one round; a heavier request of a later round must not
// overtake a light one of an earlier round, or a steady stream of heavy
// requests would starve the light ones.
func TestRunQueueHeaviestFirstWithinARoundNeverAcrossRounds(t *testing.T) {
	const round = int64(500 * ms)
	q := NewRunQueue[string](HeaviestFirst, time.Duration(round))
	q.Push(Entry{Enq: 0, Pred: int64(10 * ms)}, "light")
	q.Push(Entry{Enq: round / 2, Pred: int64(300 * ms)}, "heavy")
	q.Push(Entry{Enq: round - 1, Pred: int64(100 * ms)}, "medium")
	q.Push(Entry{Enq: round / 4, Pred: int64(100 * ms)}, "medium-later") // equal Pred: push order
	q.Push(Entry{Enq: round, Pred: int64(900 * ms)}, "next-round-heavy")
	q.Push(Entry{Enq: round + 1, Pred: 1 << 62}, "next-round-huge") // beyond roundSpan: still its own round
	q.Push(Entry{Enq: 2 * round, Pred: int64(time.Hour)}, "third-round")
	want := []string{"heavy", "medium", "medium-later", "light", "next-round-huge", "next-round-heavy", "third-round"}
	if got := popAll(q, 10*round); !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

// The Reactive Scaler reorders every tick and at least twice per function
// SLO, so a stage with a short SLO gets short rounds.
func TestRoundLenIsTheTickCappedAtHalfTheFunctionSLO(t *testing.T) {
	for _, c := range []struct{ tick, slo, want time.Duration }{
		{500 * ms, 300 * ms, 150 * ms},
		{500 * ms, 4 * time.Second, 500 * ms},
		{500 * ms, 1 * time.Second, 500 * ms},
		{500 * ms, 1, 1}, // never zero: rounds divide by it
	} {
		if got := RoundLen(c.tick, c.slo); got != c.want {
			t.Errorf("RoundLen(%v, %v) = %v, want %v", c.tick, c.slo, got, c.want)
		}
	}
}

// Under LeastSlack a request that can no longer make its deadline waits
// behind every request that still can, including ones queued after it was
// set aside; the late ones then run in order of Enq.
func TestRunQueueLeastSlackSetsAsideRequestsThatCannotMeetTheirDeadline(t *testing.T) {
	q := NewRunQueue[string](LeastSlack, 0)
	pred := int64(100 * ms)
	q.Push(Entry{Enq: int64(300 * ms), Deadline: int64(900 * ms), Pred: pred}, "late-1")            // slack ends 0.8 s
	q.Push(Entry{Enq: int64(100 * ms), Deadline: int64(1000 * ms), Pred: pred}, "late-2")           // slack ends 0.9 s
	q.Push(Entry{Enq: int64(1500 * ms), Deadline: int64(2500 * ms), Pred: pred}, "on-time")         // slack ends 2.4 s
	q.Push(Entry{Enq: int64(1600 * ms), Deadline: int64(2100 * ms), Pred: pred}, "exactly-on-time") // ends at its deadline
	now := int64(2 * time.Second)

	v, e, ok := q.Pop(now)
	if !ok || v != "exactly-on-time" || e.Deadline != int64(2100*ms) {
		t.Fatalf("first pop %q %+v, want the one that still just meets its deadline", v, e)
	}
	if q.Len() != 3 {
		t.Fatalf("Len %d after setting two aside, want 3 (set-aside requests still count)", q.Len())
	}
	q.Push(Entry{Enq: now, Deadline: now + int64(time.Second), Pred: pred}, "arrives-after")
	if got, want := values(q.Ordered(nil)), []string{"on-time", "arrives-after", "late-1", "late-2"}; !slices.Equal(got, want) {
		t.Fatalf("Ordered %v, want %v (set-aside ones last, in the order they were set aside)", got, want)
	}
	if got, want := popAll(q, now), []string{"on-time", "arrives-after", "late-2", "late-1"}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v (late ones after the rest, by Enq)", got, want)
	}
}

// A set-aside request is never dropped and never returns to the main
// queue, even if a later Pop's clock would have let it through.
func TestRunQueueLeastSlackSetAsideIsFinal(t *testing.T) {
	q := NewRunQueue[int](LeastSlack, 0)
	q.Push(Entry{Enq: 0, Deadline: 10, Pred: 5}, 1)
	if _, _, ok := q.Pop(100); !ok {
		t.Fatal("a late request must still run")
	}
	q.Push(Entry{Enq: 0, Deadline: 10, Pred: 5}, 2)
	q.Push(Entry{Enq: 50, Deadline: 200, Pred: 5}, 3)
	if v, _, _ := q.Pop(100); v != 3 { // 2 is set aside here
		t.Fatalf("popped %d, want 3", v)
	}
	q.Push(Entry{Enq: 60, Deadline: 200, Pred: 5}, 4)
	if got := popAll(q, 0); !slices.Equal(got, []int{4, 2}) {
		t.Fatalf("popped %v, want [4 2]", got)
	}
}

func TestRunQueueOtherOrdersNeverSetAside(t *testing.T) {
	for _, o := range []Order{FIFO, HeaviestFirst} {
		q := NewRunQueue[int](o, 10)
		q.Push(Entry{Enq: 0, Deadline: 1, Pred: 5}, 1)
		q.Push(Entry{Enq: 1, Deadline: 1000, Pred: 5}, 2)
		if got := popAll(q, 100); !slices.Equal(got, []int{1, 2}) {
			t.Errorf("order %d popped %v, want [1 2]", o, got)
		}
	}
}

func TestRunQueueRemoveFuncRemovesFromBothQueuesAndKeepsTheOrder(t *testing.T) {
	q := NewRunQueue[int](LeastSlack, 0)
	for i := range 10 {
		// Odd i cannot meet its deadline at now = 100.
		deadline := int64(1000 - i)
		if i%2 == 1 {
			deadline = int64(50 + i)
		}
		q.Push(Entry{Enq: int64(i), Deadline: deadline, Pred: 10}, i)
	}
	if v, _, _ := q.Pop(100); v != 8 { // sets aside every odd i
		t.Fatalf("popped %d, want 8", v)
	}
	if n := q.RemoveFunc(func(v int) bool { return v%3 == 0 }); n != 4 {
		t.Fatalf("removed %d, want 4 (0, 6 queued; 3, 9 set aside)", n)
	}
	if n := q.RemoveFunc(func(int) bool { return false }); n != 0 {
		t.Fatalf("removed %d with a predicate that drops nothing", n)
	}
	if q.Len() != 5 {
		t.Fatalf("Len %d, want 5", q.Len())
	}
	if got, want := popAll(q, 100), []int{4, 2, 1, 5, 7}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	if n := q.RemoveFunc(func(int) bool { return true }); n != 0 {
		t.Fatalf("removed %d from an empty queue", n)
	}
}

func TestRunQueueOldestEnqSeesEveryQueuedRequest(t *testing.T) {
	for _, o := range []Order{FIFO, HeaviestFirst, LeastSlack} {
		q := NewRunQueue[int](o, 1000)
		if _, ok := q.OldestEnq(); ok {
			t.Fatalf("order %d: an empty queue has no oldest request", o)
		}
		q.Push(Entry{Enq: 40, Deadline: 10_000, Pred: 1}, 1)
		q.Push(Entry{Enq: 20, Deadline: 10_000, Pred: 2}, 2)
		q.Push(Entry{Enq: 30, Deadline: 10_000, Pred: 900}, 3) // runs first but for FIFO
		if got, ok := q.OldestEnq(); !ok || got != 20 {
			t.Errorf("order %d: oldest %d, %v; want 20", o, got, ok)
		}
	}
	q := NewRunQueue[int](LeastSlack, 0)
	q.Push(Entry{Enq: 5, Deadline: 6, Pred: 1}, 1)
	q.Push(Entry{Enq: 10, Deadline: 100, Pred: 1}, 2)
	q.Push(Entry{Enq: 20, Deadline: 100, Pred: 1}, 3)
	q.Pop(50) // sets 1 aside, runs 2
	if got, _ := q.OldestEnq(); got != 5 {
		t.Errorf("oldest %d, want the set-aside request's 5", got)
	}
}

func TestRunQueueOrderedListsPopOrderAndAppends(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, o := range []Order{FIFO, HeaviestFirst, LeastSlack} {
		q := NewRunQueue[int](o, 7)
		for i := range 200 {
			enq := int64(rng.IntN(100))
			// Deadline ≥ Enq + Pred: nothing is late at time 0.
			q.Push(Entry{Enq: enq, Deadline: enq + 20 + int64(rng.IntN(50)), Pred: int64(rng.IntN(20))}, i)
		}
		got := q.Ordered([]Queued[int]{{Value: -1}})
		if got[0].Value != -1 || len(got) != 201 || q.Len() != 200 {
			t.Fatalf("order %d: Ordered returned %d entries (head %d) and left %d queued", o, len(got), got[0].Value, q.Len())
		}
		// At time 0 nothing is late, so Pop takes exactly the listed order.
		if want := popAll(q, 0); !slices.Equal(values(got[1:]), want) {
			t.Fatalf("order %d: Ordered %v, Pop %v", o, values(got[1:]), want)
		}
	}
}

// TestRunQueueMatchesSortedReference drives every order with random pushes,
// pops, removals and clock steps and checks each result against a plain
// slice sorted by the documented rules.
func TestRunQueueMatchesSortedReference(t *testing.T) {
	for seed := range uint64(40) {
		for _, o := range []Order{FIFO, HeaviestFirst, LeastSlack} {
			checkAgainstReference(t, seed, o)
		}
	}
}

// FuzzRunQueuePopsInOrder is the reference check with fuzzed seeds: the
// determinism of the simulator rests on the run order.
func FuzzRunQueuePopsInOrder(f *testing.F) {
	for _, s := range []uint64{1, 7, 99} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, seed uint64, order uint8) {
		checkAgainstReference(t, seed, Order(order%3))
	})
}

// refItem is a queued request in the reference model.
type refItem struct {
	Entry
	v       int
	seq     int // push order
	lateSeq int // set-aside order; 0 while in the main queue
}

// refBefore is the documented run order of the main queue, written as the
// tuple it means rather than as the packed key the queue uses.
func refBefore(o Order, round int64, a, b refItem) bool {
	var c int
	switch o {
	case FIFO:
		c = cmp.Compare(a.Enq, b.Enq)
	case HeaviestFirst:
		c = cmp.Or(cmp.Compare(a.Enq/round, b.Enq/round), cmp.Compare(b.Pred, a.Pred))
	case LeastSlack:
		c = cmp.Compare(a.Deadline-a.Pred, b.Deadline-b.Pred)
	}
	return c < 0 || (c == 0 && a.seq < b.seq)
}

func checkAgainstReference(t *testing.T, seed uint64, o Order) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(o)))
	round := int64(1 + rng.IntN(20))
	q := NewRunQueue[int](o, time.Duration(round))
	var main, late []refItem
	var now int64
	pushes, lates := 0, 0
	for step := range 600 {
		switch op := rng.IntN(10); {
		case op < 5:
			pushes++
			// Small ranges so that keys tie often.
			// Odd seeds push at the clock's now, as both drivers do (the
			// log OldestEnq reads); even ones also in the past (its scan).
			e := Entry{Enq: max(0, now-int64(rng.IntN(3))), Pred: int64(rng.IntN(8))}
			if seed%2 == 1 {
				e.Enq = now
			}
			e.Deadline = e.Enq + int64(rng.IntN(30))
			q.Push(e, pushes)
			main = append(main, refItem{Entry: e, v: pushes, seq: pushes})
		case op < 9:
			now += int64(rng.IntN(4))
			want, wantOK := refPop(o, round, now, &main, &late, &lates)
			v, e, ok := q.Pop(now)
			if ok != wantOK || (ok && (v != want.v || e != want.Entry)) {
				t.Fatalf("seed %d order %d step %d: Pop(%d) = %d %+v %v, want %d %+v %v", seed, o, step, now, v, e, ok, want.v, want.Entry, wantOK)
			}
		default:
			k := 2 + rng.IntN(5)
			drop := func(v int) bool { return v%k == 0 }
			want := len(main) + len(late)
			main = slices.DeleteFunc(main, func(r refItem) bool { return drop(r.v) })
			late = slices.DeleteFunc(late, func(r refItem) bool { return drop(r.v) })
			want -= len(main) + len(late)
			if got := q.RemoveFunc(drop); got != want {
				t.Fatalf("seed %d order %d step %d: RemoveFunc removed %d, want %d", seed, o, step, got, want)
			}
		}
		checkListing(t, q, o, round, main, late)
	}
}

// refPop removes the reference's next request at now, setting late ones
// aside under LeastSlack.
func refPop(o Order, round, now int64, main, late *[]refItem, lates *int) (refItem, bool) {
	for len(*main) > 0 {
		i := 0
		for j := range *main {
			if refBefore(o, round, (*main)[j], (*main)[i]) {
				i = j
			}
		}
		r := (*main)[i]
		*main = slices.Delete(*main, i, i+1)
		if o == LeastSlack && now+r.Pred > r.Deadline {
			*lates++
			r.lateSeq = *lates
			*late = append(*late, r)
			continue
		}
		return r, true
	}
	if len(*late) == 0 {
		return refItem{}, false
	}
	i := 0
	for j, r := range *late {
		if r.Enq < (*late)[i].Enq || (r.Enq == (*late)[i].Enq && r.lateSeq < (*late)[i].lateSeq) {
			i = j
		}
	}
	r := (*late)[i]
	*late = slices.Delete(*late, i, i+1)
	return r, true
}

// checkListing compares Len, OldestEnq and Ordered with the reference.
func checkListing(t *testing.T, q *RunQueue[int], o Order, round int64, main, late []refItem) {
	t.Helper()
	if q.Len() != len(main)+len(late) {
		t.Fatalf("Len %d, want %d", q.Len(), len(main)+len(late))
	}
	var want []int
	oldest, found := int64(0), false
	sorted := slices.Clone(main)
	slices.SortFunc(sorted, func(a, b refItem) int {
		if refBefore(o, round, a, b) {
			return -1
		}
		return 1
	})
	lateSorted := slices.Clone(late)
	slices.SortFunc(lateSorted, func(a, b refItem) int { return cmp.Compare(a.lateSeq, b.lateSeq) })
	for _, r := range append(sorted, lateSorted...) {
		want = append(want, r.v)
		if !found || r.Enq < oldest {
			oldest, found = r.Enq, true
		}
	}
	if got := values(q.Ordered(nil)); !slices.Equal(got, want) {
		t.Fatalf("Ordered %v, want %v", got, want)
	}
	for _, k := range []int{0, 1, 2, len(main) - 1, len(main), len(main) + 1, len(want) / 2, len(want) - 1, len(want) + 3} {
		got := values(q.OrderedFirst(nil, k))
		if w := want[:max(0, min(k, len(want)))]; !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
			t.Fatalf("OrderedFirst(%d) %v, want %v", k, got, w)
		}
	}
	if got, ok := q.OldestEnq(); ok != found || got != oldest {
		t.Fatalf("OldestEnq %d %v, want %d %v", got, ok, oldest, found)
	}
}

// BenchmarkRunQueuePushPop is one request through a LeastSlack queue that
// holds 64: the drivers' hot path, which must not allocate.
func BenchmarkRunQueuePushPop(b *testing.B) {
	q := NewRunQueue[int32](LeastSlack, 0)
	const depth = 64
	for i := range int64(depth) {
		q.Push(Entry{Enq: i, Deadline: i*37%depth + int64(time.Hour), Pred: i % 7}, int32(i))
	}
	b.ReportAllocs()
	var now int64
	for b.Loop() {
		now++
		q.Push(Entry{Enq: now, Deadline: now + now*37%depth + int64(time.Hour), Pred: now % 7}, int32(now))
		if _, _, ok := q.Pop(now); !ok {
			b.Fatal("empty queue")
		}
	}
}

// Pushed at a clock's now, the queue answers OldestEnq from its log, not
// a scan, under the orders that do not pop oldest first, through pops,
// set-asides and the log's compaction; one push from the past turns the
// log off until the queue empties.
func TestRunQueueOldestEnqFromTheLogOfPushes(t *testing.T) {
	for _, o := range []Order{HeaviestFirst, LeastSlack} {
		q := NewRunQueue[int](o, 10)
		for i := range 5000 {
			q.Push(Entry{Enq: int64(i), Deadline: int64(i) + 100, Pred: int64(i % 7)}, i)
		}
		for now := int64(0); q.Len() > 1; now += 3 {
			q.Pop(now)
			if now%97 != 0 {
				continue
			}
			got, _ := q.OldestEnq()
			want := int64(math.MaxInt64)
			for _, x := range q.Ordered(nil) {
				want = min(want, x.Enq)
			}
			if got != want || q.enqs.off {
				t.Fatalf("order %d: OldestEnq %d (log off %v), want %d", o, got, q.enqs.off, want)
			}
		}
		if len(q.enqs.enq) > 2500 {
			t.Errorf("order %d: the log kept %d entries for %d queued", o, len(q.enqs.enq), q.Len())
		}
		q.Push(Entry{Enq: -1}, -1)
		if got, _ := q.OldestEnq(); got != -1 || !q.enqs.off {
			t.Fatalf("order %d: after a push from the past OldestEnq %d, log off %v", o, got, q.enqs.off)
		}
		for q.Len() > 0 {
			q.Pop(1 << 40)
		}
		q.Push(Entry{Enq: 7}, 7)
		if q.enqs.off {
			t.Errorf("order %d: the log stayed off after the queue emptied", o)
		}
	}
}
