package rtcontroller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// statusCoalesce is how long after a status write of an RTResource a
// change of its replica counts alone waits, so that the counts of one
// scale-up's pods (created together, ready one by one) go out in one
// write instead of one per pod event. Every status write is sent to every
// watcher of RTResources (the controller's, Knative's autoscaler's and
// controller's, the garbage collector's, ...): in RQ1 on Knative the
// controller wrote 741 statuses for 36 scale-ups in one case, and the API
// server's watch cache held each write of the KPA up behind them. What a
// client acts on goes out at once: a new observed generation (the
// processing mark), a condition that changes its status or reason, the
// selector, the criticality.
const statusCoalesce = time.Second

// writeTimes remembers each key's last status write: when, and the
// resourceVersion it was written over.
type writeTimes struct {
	mu sync.Mutex
	at map[Key]lastWrite
}

type lastWrite struct {
	at   time.Time
	over string // the resourceVersion the write replaced
}

func (w *writeTimes) note(key Key, over string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = map[Key]lastWrite{}
	}
	w.at[key] = lastWrite{at: at, over: over}
}

// stale reports whether rv is the version the key's last status write
// replaced: a cache that still holds it has not seen that write.
func (w *writeTimes) stale(key Key, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.at[key]
	return ok && rv != "" && last.over == rv
}

func (w *writeTimes) forget(key Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.at, key)
}

// wait is how long the write of next over cur should wait: 0 to write
// now, or the rest of the coalescing window after the key's last write
// when only the replica counts (and the conditions' messages, which
// quote them) change.
func (w *writeTimes) wait(key Key, cur, next gantryv1.RTResourceStatus, now time.Time) time.Duration {
	if !onlyCountsChange(cur, next) {
		return 0
	}
	w.mu.Lock()
	last, ok := w.at[key]
	w.mu.Unlock()
	if !ok {
		return 0
	}
	return max(0, last.at.Add(statusCoalesce).Sub(now))
}

// onlyCountsChange reports whether next differs from cur in the replica
// counts and condition messages alone: the same observed generation,
// selector and criticality, and the same conditions with the same status,
// reason and observed generation.
func onlyCountsChange(cur, next gantryv1.RTResourceStatus) bool {
	if cur.ObservedGeneration != next.ObservedGeneration || cur.Selector != next.Selector ||
		cur.Criticality != next.Criticality || len(cur.Conditions) != len(next.Conditions) {
		return false
	}
	for i, n := range next.Conditions {
		c := cur.Conditions[i]
		if c.Type != n.Type || c.Status != n.Status || c.Reason != n.Reason || c.ObservedGeneration != n.ObservedGeneration {
			return false
		}
	}
	counts := func(s gantryv1.RTResourceStatus) gantryv1.RTResourceStatus {
		s.Replicas, s.ReadyReplicas, s.AvailableReplicas, s.UpdatedReplicas, s.Conditions = 0, 0, 0, 0, nil
		return s
	}
	return equality.Semantic.DeepEqual(counts(cur), counts(next))
}
