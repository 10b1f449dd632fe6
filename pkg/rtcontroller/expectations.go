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
	mu    sync.Mutex // guards byOwner
	// byOwner holds the outstanding operations per owner incarnation.
	byOwner map[ownerKey]*pendingOps
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
	if p.adds <= 0 && len(p.deletes) == 0 {
		return true
	}
	return e.clock.Since(p.setAt) > expectationTTL
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
	e.byOwner[k] = p
}

// creationObserved lowers the create count: the cache saw a pod, or a create
// failed and will never be seen.
func (e *expectations) creationObserved(k ownerKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.byOwner[k]; ok && p.adds > 0 {
		p.adds--
	}
}

// deletionObserved clears one pendingOps delete.
func (e *expectations) deletionObserved(k ownerKey, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.byOwner[k]; ok {
		delete(p.deletes, uid)
	}
}

// forget drops the record of an owner that no longer exists.
func (e *expectations) forget(k ownerKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byOwner, k)
}
