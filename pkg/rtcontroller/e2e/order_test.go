package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/rtcontroller"
	"gantry.dev/gantry/pkg/rtqueue"
)

// marks records, in etcd commit order, the first status write in which each
// RTResource reports a given generation: the "starts processing" stage.
type marks struct {
	mu sync.Mutex                  // guards at
	at map[string]map[int64]uint64 // name -> generation -> resourceVersion of the mark
}

func (m *marks) record(rt *gantryv1.RTResource) {
	rv, err := strconv.ParseUint(rt.ResourceVersion, 10, 64)
	if err != nil || rt.Status.ObservedGeneration == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byGen := m.at[rt.Name]
	if byGen == nil {
		byGen = map[int64]uint64{}
		m.at[rt.Name] = byGen
	}
	if _, seen := byGen[rt.Status.ObservedGeneration]; !seen {
		byGen[rt.Status.ObservedGeneration] = rv
	}
}

func (m *marks) get(name string, gen int64) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rv, ok := m.at[name][gen]
	return rv, ok
}

func (e *env) watchMarks(t *testing.T, fromRV string) *marks {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := e.rts.Namespace(e.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: fromRV})
	if err != nil {
		t.Fatal(err)
	}
	m := &marks{at: map[string]map[int64]uint64{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if rt, ok := ev.Object.(*gantryv1.RTResource); ok && ev.Type == watch.Modified {
				m.record(rt)
			}
		}
	}()
	return m
}

// orderRun churns low-criticality RTResources through a one-worker
// controller, scales a critical RTResource up while that work is queued, and
// returns how many low-criticality objects whose processing started after
// the scale-up started before the critical one (jumpedBy) and in total
// (queued). ResourceVersions are etcd revisions, so they order the writes.
func orderRun(t *testing.T, queue string) (jumpedBy, queued int) {
	e := setup(t)
	// One worker and a slow client (5 qps, so each low-criticality reconcile
	// takes over half a second) make a queue build up, and keep the informer's
	// delay in delivering the scale-up far shorter than one reconcile. The
	// reserve is off so priority order alone decides.
	r := e.startController(t, ctrlOpts{queue: queue, qps: 5, burst: 1,
		pool: rtqueue.PoolConfig{Min: 1, Max: 1, IdleThreshold: 1}})
	crit := e.create(t, e.newRT("critical", 0, 90))
	e.waitReady(t, "critical", 0)
	// The critical object's own status writes wake its key again; were that
	// entry still queued when the churn starts, the scale-up would merge
	// into it (a work queue holds a key once) and take its earlier place.
	// Start the churn from an idle queue, as the scale-up of a settled
	// service does.
	e2etest.Eventually(t, "the controller to go idle", func(context.Context) (bool, error) {
		if r.engine.Queue().Len() != 0 {
			return false, nil
		}
		time.Sleep(2 * time.Second) // a reconcile in flight may still write status, and a delayed requeue (the 1 s status coalescing) fire
		return r.engine.Queue().Len() == 0, nil
	})
	m := e.watchMarks(t, e.get(t, "critical").ResourceVersion)

	const lows = 15
	for i := range lows {
		e.create(t, e.newRT(fmt.Sprintf("low-%02d", i), 1, 1))
	}
	e2etest.Eventually(t, "the churn to be under way", func(context.Context) (bool, error) {
		_, ok := m.get("low-01", 1)
		return ok, nil
	})
	scaled := e.scaleTo(t, crit.Name, 1)
	scaledRV, _ := strconv.ParseUint(scaled.ResourceVersion, 10, 64)
	e.waitReady(t, "critical", 1)
	e2etest.Eventually(t, "every low-criticality object to start processing", func(context.Context) (bool, error) {
		for i := range lows {
			if _, ok := m.get(fmt.Sprintf("low-%02d", i), 1); !ok {
				return false, nil
			}
		}
		return true, nil
	})

	critRV, ok := m.get("critical", 2)
	if !ok {
		t.Fatal("no status write observed for the critical scale-up")
	}
	for i := range lows {
		rv, ok := m.get(fmt.Sprintf("low-%02d", i), 1)
		if !ok || rv < scaledRV {
			continue // processed before the scale-up, or missed by the watch
		}
		queued++
		if rv < critRV {
			jumpedBy++
		}
	}
	t.Logf("%s: %d low-criticality objects started after the scale-up; %d of them before the critical one", queue, queued, jumpedBy)
	return jumpedBy, queued
}

// PREEMPT-FaaS RQ1: a critical scale-up "starts processing" before the
// low-criticality orchestration work already queued. With one worker, at
// most the key already in flight may start first; a running reconcile is
// never interrupted.
func TestCriticalScaleUpStartsBeforeQueuedLowCriticalityWork(t *testing.T) {
	jumpedBy, queued := orderRun(t, rtcontroller.QueueRT)
	if queued < 5 {
		t.Fatalf("only %d low-criticality objects were queued at the scale-up; the test needs a backlog", queued)
	}
	if jumpedBy > 1 {
		t.Fatalf("%d of %d queued low-criticality objects started before the critical scale-up, want at most the 1 in flight", jumpedBy, queued)
	}
}

// The --queue=fifo ablation: the same scale-up waits behind every queued
// low-criticality object, which is the vanilla behaviour the engine removes.
func TestFIFOAblationQueuesCriticalScaleUpBehindLowCriticalityWork(t *testing.T) {
	jumpedBy, queued := orderRun(t, rtcontroller.QueueFIFO)
	if queued < 5 || jumpedBy != queued {
		t.Fatalf("%d of %d queued low-criticality objects started before the critical scale-up, want all of them", jumpedBy, queued)
	}
}
