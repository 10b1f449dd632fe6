package rtqueue

import (
	"math/bits"
	"time"
)

// entry is one key waiting to be handed out. Entries are linked into the
// FIFO of their priority level; the links make removal O(1) when a re-add
// raises an item's priority.
type entry[T comparable] struct {
	item     T
	priority int
	seq      uint64    // global insertion order; breaks ties FIFO
	enqueued time.Time // first Add of this wait, for the wait-time metric
	levelAt  time.Time // entered the current level; the aging clock
	prev     *entry[T]
	next     *entry[T]
}

// levels holds one FIFO per priority and a bitmap of non-empty levels, so
// the head of the highest level is found without scanning all 100.
// It is not safe for concurrent use; Queue guards it with its mutex.
type levels[T comparable] struct {
	head, tail [numLevels]*entry[T]
	count      [numLevels]int
	nonEmpty   [2]uint64
	size       int
}

func (l *levels[T]) push(e *entry[T]) {
	p := e.priority
	e.prev, e.next = l.tail[p], nil
	if l.tail[p] == nil {
		l.head[p] = e
	} else {
		l.tail[p].next = e
	}
	l.tail[p] = e
	l.count[p]++
	l.size++
	l.nonEmpty[p/64] |= 1 << (p % 64)
}

func (l *levels[T]) remove(e *entry[T]) {
	p := e.priority
	if e.prev == nil {
		l.head[p] = e.next
	} else {
		e.prev.next = e.next
	}
	if e.next == nil {
		l.tail[p] = e.prev
	} else {
		e.next.prev = e.prev
	}
	e.prev, e.next = nil, nil
	l.count[p]--
	l.size--
	if l.count[p] == 0 {
		l.nonEmpty[p/64] &^= 1 << (p % 64)
	}
}

// highestAtLeast returns the highest non-empty level >= floor, or -1.
func (l *levels[T]) highestAtLeast(floor int) int {
	if top := l.highestBelow(numLevels); top >= floor {
		return top
	}
	return -1
}

// highestBelow returns the highest non-empty level < limit, or -1.
func (l *levels[T]) highestBelow(limit int) int {
	if limit <= 0 {
		return -1
	}
	for w := (limit - 1) / 64; w >= 0; w-- {
		word := l.nonEmpty[w]
		if n := limit - w*64; n < 64 {
			word &= 1<<n - 1
		}
		if word != 0 {
			return w*64 + 63 - bits.LeadingZeros64(word)
		}
	}
	return -1
}

// cursor walks the waiting items from the highest base priority down,
// counting rather than visiting them, for matching items to waiters.
func (l *levels[T]) cursor() itemCursor[T] {
	c := itemCursor[T]{l: l}
	c.moveBelow(numLevels)
	return c
}

// itemCursor is the next unclaimed item's level and how many unclaimed
// items are left at it.
type itemCursor[T comparable] struct {
	l     *levels[T]
	level int // -1 once every item is claimed
	left  int
}

func (c *itemCursor[T]) more() bool { return c.level >= 0 }

// claim takes the next item for a waiter with this floor, if it admits it.
// The next item is the highest unclaimed one, so if the floor is above it
// the floor admits no unclaimed item at all.
func (c *itemCursor[T]) claim(floor int) bool {
	if c.level < 0 || c.level < floor {
		return false
	}
	if c.left--; c.left == 0 {
		c.moveBelow(c.level)
	}
	return true
}

func (c *itemCursor[T]) moveBelow(limit int) {
	c.level = c.l.highestBelow(limit)
	if c.level >= 0 {
		c.left = c.l.count[c.level]
	}
}

// pick chooses the next entry for a worker that accepts base priorities >=
// floor. Without aging it is the head of the highest level. With aging,
// each level's head is the oldest of its level and so has that level's
// highest effective priority; the winner is the best head by (effective
// priority desc, seq asc).
func (l *levels[T]) pick(floor int, aging time.Duration, now time.Time) *entry[T] {
	top := l.highestAtLeast(floor)
	if top < 0 {
		return nil
	}
	if aging <= 0 {
		return l.head[top]
	}
	var best *entry[T]
	bestEff := -1
	for p := top; p >= floor; p-- {
		e := l.head[p]
		if e == nil {
			continue
		}
		eff := effectivePriority(e, aging, now)
		if eff > bestEff || (eff == bestEff && e.seq < best.seq) {
			best, bestEff = e, eff
		}
	}
	return best
}

// effectivePriority raises an entry one level per Aging period it has
// waited at its current level, capped at MaxPriority.
func effectivePriority[T comparable](e *entry[T], aging time.Duration, now time.Time) int {
	waited := now.Sub(e.levelAt)
	if waited <= 0 {
		return e.priority
	}
	boost := int64(waited / aging)
	if boost >= int64(MaxPriority-e.priority) {
		return MaxPriority
	}
	return e.priority + int(boost)
}
