package rtqueue

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// feedHighWhileWaiting keeps one high-priority item ahead of "low" at all
// times, advancing the clock a step per round, and reports the round in
// which "low" was handed out (or -1).
func feedHighWhileWaiting(t *testing.T, aging, step time.Duration, rounds int) int {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := newTestQueue(t, Config[string]{Clock: clk, Aging: aging})
	q.AddWithPriority("low", 10)
	for i := range rounds {
		q.AddWithPriority(fmt.Sprint("high", i), 90)
		clk.Step(step)
		item, _ := mustGet(t, q)
		q.Done(item)
		if item == "low" {
			return i
		}
	}
	return -1
}

func TestWithoutAgingLowPriorityWaitsBehindEveryHighItem(t *testing.T) {
	if got := feedHighWhileWaiting(t, 0, time.Millisecond, 500); got != -1 {
		t.Fatalf("low item handed out in round %d under constant high load, want never (strict priority)", got)
	}
}

// TestAgingBoundsStarvation checks the documented bound: an item of
// priority p is ahead of every item enqueued more than (99-p)*Aging after
// it, so under a stream of one high item per step it starts within
// (99-p)*Aging/step rounds.
func TestAgingBoundsStarvation(t *testing.T) {
	const aging, step = 2 * time.Millisecond, time.Millisecond
	bound := int((MaxPriority - 10) * aging / step)
	got := feedHighWhileWaiting(t, aging, step, 10*bound)
	if got < 0 || got > bound {
		t.Fatalf("low item handed out in round %d, want within the aging bound of %d rounds", got, bound)
	}
	// Below 90 it cannot outrank a fresh 90, so it must not come out early.
	if early := int((90 - 10) * aging / step); got < early-1 {
		t.Fatalf("low item handed out in round %d, before it could reach priority 90 (round %d)", got, early)
	}
}

func TestEffectivePriorityCapsAt99(t *testing.T) {
	now := time.Unix(1000, 0)
	e := &entry[string]{priority: 5, levelAt: now.Add(-time.Hour)}
	if got := effectivePriority(e, time.Millisecond, now); got != MaxPriority {
		t.Fatalf("effective priority = %d, want 99", got)
	}
	e.levelAt = now.Add(3 * time.Millisecond) // clock stepped backwards
	if got := effectivePriority(e, time.Millisecond, now); got != 5 {
		t.Fatalf("effective priority with negative wait = %d, want 5", got)
	}
}

// TestAgedItemKeepsItsBasePriorityForTheReserve: aging reorders, but an
// aged background item is still background to the reserve workers.
func TestAgedItemKeepsItsBasePriorityForTheReserve(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := newTestQueue(t, Config[string]{Clock: clk, Aging: time.Millisecond})
	q.AddWithPriority("old-low", 5)
	clk.Step(time.Hour)
	q.AddWithPriority("crit", 60)
	item, prio, _ := q.getAtLeast(50, newParker())
	if item != "crit" || prio != 60 {
		t.Fatalf("reserve took %q at %d, want crit at 60", item, prio)
	}
	item, prio = mustGet(t, q)
	if item != "old-low" || prio != 5 {
		t.Fatalf("general took %q at %d, want old-low at its base priority 5", item, prio)
	}
}
