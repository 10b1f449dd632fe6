package sim

// waiting is one queued request. key orders the queue (smaller runs first);
// seq breaks ties by arrival at the function.
type waiting struct {
	key int64
	seq uint64
	req int32
}

// runQueue is a function's queue of requests waiting for a container, a
// binary min-heap by (key, seq). FIFO, heaviest-first and least-slack are
// all this heap with a different key.
type runQueue struct {
	w   []waiting
	seq uint64
}

func (q *runQueue) less(i, j int) bool {
	a, b := &q.w[i], &q.w[j]
	return a.key < b.key || (a.key == b.key && a.seq < b.seq)
}

func (q *runQueue) push(key int64, req int32) {
	q.seq++
	q.w = append(q.w, waiting{key: key, seq: q.seq, req: req})
	for i := len(q.w) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.w[i], q.w[p] = q.w[p], q.w[i]
		i = p
	}
}

func (q *runQueue) pop() int32 {
	top := q.w[0].req
	last := len(q.w) - 1
	q.w[0] = q.w[last]
	q.w = q.w[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.less(l, m) {
			m = l
		}
		if r < last && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.w[i], q.w[m] = q.w[m], q.w[i]
		i = m
	}
	return top
}

func (q *runQueue) len() int { return len(q.w) }
