package bound

// frees is the busy containers of one function ordered by when they free
// (ties by id): a treap in an arena, so that best fit can ask for the
// container that frees last no later than a given time in O(log n).
type frees struct {
	nodes []tnode
	root  int32
	spare []int32 // arena slots free for reuse
	n     int
	seed  uint64
}

type tnode struct {
	free int64
	id   int32
	pri  uint32
	l, r int32
}

const nilNode = -1

func newFrees() frees { return frees{root: nilNode, seed: 0x9e3779b97f4a7c15} }

func (t *frees) Len() int { return t.n }

// less orders (free, id) pairs.
func less(af int64, aid int32, bf int64, bid int32) bool {
	return af < bf || (af == bf && aid < bid)
}

func (t *frees) priority() uint32 {
	// xorshift: deterministic and cheap; a treap needs only that the
	// priorities look random against the keys.
	t.seed ^= t.seed << 13
	t.seed ^= t.seed >> 7
	t.seed ^= t.seed << 17
	return uint32(t.seed >> 32)
}

// Insert adds container id freeing at free.
func (t *frees) Insert(free int64, id int32) {
	var i int32
	if k := len(t.spare); k > 0 {
		i = t.spare[k-1]
		t.spare = t.spare[:k-1]
	} else {
		t.nodes = append(t.nodes, tnode{})
		i = int32(len(t.nodes) - 1)
	}
	t.nodes[i] = tnode{free: free, id: id, pri: t.priority(), l: nilNode, r: nilNode}
	a, b := t.split(t.root, free, id)
	t.root = t.merge(t.merge(a, i), b)
	t.n++
}

// Remove deletes container id freeing at free, which must be present.
func (t *frees) Remove(free int64, id int32) {
	a, b := t.split(t.root, free, id) // a < (free,id) <= b
	m, c := t.split(b, free, id+1)    // m == (free,id)
	if m != nilNode {
		t.spare = append(t.spare, m)
		t.n--
	}
	t.root = t.merge(a, c)
}

// split cuts n into the keys below (free, id) and the rest.
func (t *frees) split(n int32, free int64, id int32) (int32, int32) {
	if n == nilNode {
		return nilNode, nilNode
	}
	x := &t.nodes[n]
	if less(x.free, x.id, free, id) {
		a, b := t.split(x.r, free, id)
		t.nodes[n].r = a
		return n, b
	}
	a, b := t.split(x.l, free, id)
	t.nodes[n].l = b
	return a, n
}

func (t *frees) merge(a, b int32) int32 {
	switch {
	case a == nilNode:
		return b
	case b == nilNode:
		return a
	case t.nodes[a].pri > t.nodes[b].pri:
		t.nodes[a].r = t.merge(t.nodes[a].r, b)
		return a
	default:
		t.nodes[b].l = t.merge(a, t.nodes[b].l)
		return b
	}
}

// Min is the container that frees first.
func (t *frees) Min() (free int64, id int32, ok bool) {
	n := t.root
	if n == nilNode {
		return 0, 0, false
	}
	for t.nodes[n].l != nilNode {
		n = t.nodes[n].l
	}
	return t.nodes[n].free, t.nodes[n].id, true
}

// LastBy is the container that frees last at or before limit.
func (t *frees) LastBy(limit int64) (free int64, id int32, ok bool) {
	for n := t.root; n != nilNode; {
		x := &t.nodes[n]
		if x.free <= limit {
			free, id, ok = x.free, x.id, true
			n = x.r
		} else {
			n = x.l
		}
	}
	return free, id, ok
}

// Each calls fn for every container, in no particular order.
func (t *frees) Each(fn func(free int64, id int32)) {
	var walk func(n int32)
	walk = func(n int32) {
		if n == nilNode {
			return
		}
		walk(t.nodes[n].l)
		fn(t.nodes[n].free, t.nodes[n].id)
		walk(t.nodes[n].r)
	}
	walk(t.root)
}
