package rtcontroller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// expectationTTL bounds how long a lost watch event can stall an object: after
// it, the controller trusts its cache again, as the ReplicaSet controller does.
const expectationTTL = 5 * time.Minute

// ownerKey identifies one incarnation of an RTResource. The UID keeps a
// deleted and re-created object of the same name from inheriting the old
// one's pendingOps expectations.
type ownerKey struct {
	Namespace, Name string
	UID             types.UID
}

// expectations remembers the creates and deletes the controller has issued
// but not yet seen in its pod cache, so a reconcile never repeats them.
type expectations struct {
	clock clock.PassiveClock
	mu    sync.Mutex // guards byOwner and sweptAt
	// byOwner holds the outstanding operations per owner incarnation. A
	// record leaves as soon as it is satisfied or expired, so an owner
	// deleted while a reconcile was recording operations for it cannot
	// leave an entry behind forever.
	byOwner map[ownerKey]*pendingOps
	// sweptAt is when expired records of owners nobody asks about any more
	// were last dropped.
	sweptAt time.Time
}

type pendingOps struct {
	adds    int
	deletes map[types.UID]struct{}
	setAt   time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, byOwner: map[ownerKey]*pendingOps{}}
}

// satisfied reports whether every issued operation has been observed, or the
// record is old enough that it must have been lost.
func (e *expectations) satisfied(k ownerKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.byOwner[k]
	if !ok {
		return true
	}
	if p.met() || e.lockedExpired(p) {
		delete(e.byOwner, k)
		return true
	}
	return false
}

func (p *pendingOps) met() bool { return p.adds <= 0 && len(p.deletes) == 0 }

func (e *expectations) lockedExpired(p *pendingOps) bool {
	return e.clock.Since(p.setAt) > expectationTTL
}

// lockedSweep drops expired records at most once per TTL, so the cost stays
// amortised O(1) per expect.
func (e *expectations) lockedSweep() {
	if e.clock.Since(e.sweptAt) <= expectationTTL {
		return
	}
	e.sweptAt = e.clock.Now()
	for k, p := range e.byOwner {
		if e.lockedExpired(p) {
			delete(e.byOwner, k)
		}
	}
}

// len is the number of records held.
func (e *expectations) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.byOwner)
}

// expect records operations about to be issued. It replaces any previous
// record, which is only ever done once the previous one was satisfied.
func (e *expectations) expect(k ownerKey, adds int, deletes []types.UID) {
	p := &pendingOps{adds: adds, deletes: make(map[types.UID]struct{}, len(deletes)), setAt: e.clock.Now()}
	for _, uid := range deletes {
		p.deletes[uid] = struct{}{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lockedSweep()
	e.byOwner[k] = p
}

// creationObserved lowers the create count: the cache saw a pod, or a create
// failed and will never be seen.
func (e *expectations) creationObserved(k ownerKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.byOwner[k]; ok && p.adds > 0 {
		p.adds--
		e.lockedPruneIfMet(k, p)
	}
}

func (e *expectations) lockedPruneIfMet(k ownerKey, p *pendingOps) {
	if p.met() {
		delete(e.byOwner, k)
	}
}

// deletionObserved clears one pendingOps delete.
func (e *expectations) deletionObserved(k ownerKey, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.byOwner[k]; ok {
		delete(p.deletes, uid)
		e.lockedPruneIfMet(k, p)
	}
}

// forget drops the record of an owner that no longer exists.
func (e *expectations) forget(k ownerKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byOwner, k)
}
