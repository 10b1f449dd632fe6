// Package batch implements the request-batching rules the policies build on:
// Cypress's IS Batching (first-fit bin packing of requests onto containers
// under the SLO), IS Reordering (heaviest first, which turns first fit into
// first-fit decreasing), Kraken/Fifer static batching, and Atoll's one
// container per request.
package batch

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Item is a request to place. A container serves its requests one at a
// time, so an item fits a container when the container's backlog plus Exec
// is at most Deadline (both measured from now). Release, when set, is when
// the request arrives: it cannot start earlier, so a container idle until
// then starts it at Release. Packing items with releases in arrival order
// sizes containers for a stream of requests rather than a standing queue.
type Item struct {
	Exec     time.Duration
	Deadline time.Duration
	Release  time.Duration
}

const unopened = math.MaxInt64

// Packer places items first-fit in O(log n) each: a segment tree holds every
// container's backlog and each node the minimum below it, so the leftmost
// container with backlog <= Deadline-Exec is found by one descent. A Packer
// reuses its memory across Reset calls.
type Packer struct {
	tree       []int64 // 1-based heap layout; leaves at [size, 2·size)
	size       int
	used       int   // containers in use: existing + opened
	existing   int   // containers passed to Reset
	newBacklog int64 // backlog of a freshly opened container
}

// Reset starts a packing over containers with the given backlogs. A new
// container starts with backlog newBacklog (its cold start, or 0 when
// sizing for the future). capacity is how many containers may be opened;
// Place never opens more (it reports -1).
func (p *Packer) Reset(backlogs []time.Duration, newBacklog time.Duration, capacity int) {
	n := len(backlogs) + max(0, capacity)
	size := 1
	for size < n {
		size <<= 1
	}
	if cap(p.tree) < 2*size {
		p.tree = make([]int64, 2*size)
	}
	p.tree = p.tree[:2*size]
	p.size, p.used, p.existing, p.newBacklog = size, len(backlogs), len(backlogs), int64(newBacklog)
	for i := range size {
		v := int64(unopened)
		if i < len(backlogs) {
			v = int64(backlogs[i])
		}
		p.tree[size+i] = v
	}
	for i := size - 1; i >= 1; i-- {
		p.tree[i] = min(p.tree[2*i], p.tree[2*i+1])
	}
}

// Place puts the item in the first container where it meets its deadline,
// opening a new container when none does. It returns the container index
// (existing ones first, then opened ones in order) or -1 when a container
// would be needed but capacity is exhausted.
func (p *Packer) Place(it Item) int {
	limit := int64(it.Deadline - it.Exec)
	rel, exec := int64(it.Release), int64(it.Exec)
	// A container fits if it starts the item by limit; it starts at the
	// later of its backlog and the release, so a release past limit fits
	// nowhere.
	if i := p.first(limit); i >= 0 && rel <= limit {
		p.set(i, max(p.tree[p.size+i], rel)+exec)
		return i
	}
	if p.used >= p.size {
		return -1
	}
	i := p.used
	p.used++
	p.set(i, max(p.newBacklog, rel)+exec)
	return i
}

// first returns the leftmost leaf with backlog <= limit, or -1.
func (p *Packer) first(limit int64) int {
	if p.tree[1] > limit {
		return -1
	}
	i := 1
	for i < p.size {
		i *= 2
		if p.tree[i] > limit {
			i++
		}
	}
	return i - p.size
}

func (p *Packer) set(i int, v int64) {
	i += p.size
	p.tree[i] = v
	for i > 1 {
		i /= 2
		p.tree[i] = min(p.tree[2*i], p.tree[2*i+1])
	}
}

// Opened is how many containers Place has opened since Reset.
func (p *Packer) Opened() int { return p.used - p.existing }

// Backlog is container i's backlog (for tests and diagnostics).
func (p *Packer) Backlog(i int) time.Duration { return time.Duration(p.tree[p.size+i]) }

// FirstFit packs items in the given order onto fresh containers and
// returns how many containers it opens: IS Batching sizing.
func FirstFit(p *Packer, items []Item) int {
	p.Reset(nil, 0, len(items))
	for _, it := range items {
		p.Place(it)
	}
	return p.Opened()
}

// Static is Kraken's and Fifer's container count for n requests: batches
// of floor(slo / meanExec) requests each (at least 1).
func Static(n int, slo, meanExec time.Duration) int {
	if n <= 0 {
		return 0
	}
	return (n + StaticBatch(slo, meanExec) - 1) / StaticBatch(slo, meanExec)
}

// StaticBatch is floor(slo / meanExec), at least 1.
func StaticBatch(slo, meanExec time.Duration) int {
	if meanExec <= 0 {
		return math.MaxInt32
	}
	return max(1, int(slo/meanExec))
}

// SortDecreasing orders items heaviest first (stable), which makes a
// following FirstFit first-fit decreasing.
func SortDecreasing(items []Item) {
	slices.SortStableFunc(items, func(a, b Item) int { return cmp.Compare(b.Exec, a.Exec) })
}
