package bound

// frees is the busy containers of one function ordered by when they free
// (ties by id), so that the planner can take the one that frees first and
// best fit can ask for the one that frees last no later than a given time.
//
// It is a sorted array with room at both ends: the live entries are
// s[head:]. The planner's traffic is lopsided, and this shape makes each
// common operation cheap: the container that frees first leaves from the
// front (head moves, nothing is copied), a job placed now frees after
// most busy ones and goes in near the back, and an entry in the middle
// moves the shorter side by one. It replaced a treap (recursive split and
// merge, a third of the oracle's time); its answers are the same, since
// they depend on the set of keys alone.
type frees struct {
	s    []fentry
	head int
}

type fentry struct {
	free int64
	id   int32
}

func newFrees() frees { return frees{} }

func (t *frees) Len() int { return len(t.s) - t.head }

// less orders (free, id) pairs.
func less(af int64, aid int32, bf int64, bid int32) bool {
	return af < bf || (af == bf && aid < bid)
}

// search is the position in the live entries of the first at or after
// (free, id).
func (t *frees) search(free int64, id int32) int {
	live := t.s[t.head:]
	lo, hi := 0, len(live)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(live[m].free, live[m].id, free, id) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Insert adds container id freeing at free.
func (t *frees) Insert(free int64, id int32) {
	x := fentry{free: free, id: id}
	p := t.search(free, id)
	n := t.Len()
	if t.head > 0 && p < n-p {
		// Shift the front part one place left.
		copy(t.s[t.head-1:], t.s[t.head:t.head+p])
		t.head--
		t.s[t.head+p] = x
		return
	}
	if t.head > 0 && len(t.s) == cap(t.s) && t.head >= len(t.s)/2 {
		t.compact()
	}
	t.s = append(t.s, fentry{})
	at := t.head + p
	copy(t.s[at+1:], t.s[at:len(t.s)-1])
	t.s[at] = x
}

// compact moves the live entries to the front of the array.
func (t *frees) compact() {
	t.s = t.s[:copy(t.s, t.s[t.head:])]
	t.head = 0
}

// Remove deletes container id freeing at free, if present.
func (t *frees) Remove(free int64, id int32) {
	p := t.search(free, id)
	n := t.Len()
	if p == n || t.s[t.head+p] != (fentry{free: free, id: id}) {
		return
	}
	if p < n-1-p {
		// Shift the front part one place right.
		copy(t.s[t.head+1:], t.s[t.head:t.head+p])
		t.head++
	} else {
		at := t.head + p
		copy(t.s[at:], t.s[at+1:])
		t.s = t.s[:len(t.s)-1]
	}
	if t.head == len(t.s) {
		t.s, t.head = t.s[:0], 0
	}
}

// Min is the container that frees first.
func (t *frees) Min() (free int64, id int32, ok bool) {
	if t.head == len(t.s) {
		return 0, 0, false
	}
	e := t.s[t.head]
	return e.free, e.id, true
}

// LastBy is the container that frees last at or before limit.
func (t *frees) LastBy(limit int64) (free int64, id int32, ok bool) {
	live := t.s[t.head:]
	// The first that frees after limit; the one before it is the answer.
	lo, hi := 0, len(live)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if live[m].free <= limit {
			lo = m + 1
		} else {
			hi = m
		}
	}
	p := lo
	if p == 0 {
		return 0, 0, false
	}
	e := live[p-1]
	return e.free, e.id, true
}

// Each calls fn for every container, in order of when they free.
func (t *frees) Each(fn func(free int64, id int32)) {
	for _, e := range t.s[t.head:] {
		fn(e.free, e.id)
	}
}
