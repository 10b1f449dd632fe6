package rtcontroller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestExpectationsWaitForEveryObservedOperation(t *testing.T) {
	e := newExpectations(clocktesting.NewFakePassiveClock(t0))
	k := ownerKey{Namespace: "ns", Name: "svc", UID: "u1"}
	e.expect(k, 2, []types.UID{"a"})
	e.creationObserved(k)
	e.deletionObserved(k, "a")
	if e.satisfied(k) {
		t.Fatal("satisfied with one create still unseen")
	}
	e.creationObserved(k)
	if !e.satisfied(k) {
		t.Fatal("not satisfied after every operation was seen")
	}
}

// A re-created object of the same name must not inherit the pending
// operations of the deleted one (the reference looked objects up by name).
func TestExpectationsAreKeyedByUID(t *testing.T) {
	e := newExpectations(clocktesting.NewFakePassiveClock(t0))
	e.expect(ownerKey{Namespace: "ns", Name: "svc", UID: "old"}, 3, nil)
	if !e.satisfied(ownerKey{Namespace: "ns", Name: "svc", UID: "new"}) {
		t.Fatal("new incarnation blocked by the old one's expectations")
	}
}

func TestExpectationsExpireSoALostEventCannotStallForever(t *testing.T) {
	c := clocktesting.NewFakePassiveClock(t0)
	e := newExpectations(c)
	k := ownerKey{Namespace: "ns", Name: "svc", UID: "u1"}
	e.expect(k, 1, nil)
	c.SetTime(t0.Add(expectationTTL + time.Second))
	if !e.satisfied(k) {
		t.Fatal("expired expectation still blocks")
	}
}

// Thousands of owners come and go; records of satisfied operations, and of
// owners deleted before their operations were seen, must not pile up.
func TestExpectationsDoNotGrowWithOwnerChurn(t *testing.T) {
	c := clocktesting.NewFakePassiveClock(t0)
	e := newExpectations(c)
	for i := range 5000 {
		k := ownerKey{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i), UID: types.UID(fmt.Sprint(i))}
		e.expect(k, 1, []types.UID{"p"})
		e.creationObserved(k)
		if i%10 != 0 {
			e.deletionObserved(k, "p") // every tenth owner is deleted with a delete unseen
		}
	}
	if n := e.len(); n != 500 {
		t.Fatalf("%d records after 4500 owners saw all their operations, want the 500 unmet ones", n)
	}
	c.SetTime(t0.Add(expectationTTL + time.Second))
	e.expect(ownerKey{Namespace: "ns", Name: "late", UID: "late"}, 1, nil)
	if n := e.len(); n != 1 {
		t.Fatalf("%d records after the unmet ones expired, want only the new one", n)
	}
}
