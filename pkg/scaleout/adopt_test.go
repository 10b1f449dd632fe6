package scaleout

import (
	"context"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/dispatch/dispatchtest"
	"gantry.dev/gantry/pkg/stack"
)

// deployReports is a follower's backend whose Deploy reports the
// instances already serving the function before it returns, as the
// Kubernetes backend does from the EndpointSlices it has cached: the
// report reaches the dispatcher before it has registered the function.
type deployReports struct {
	followBackend
	inst backend.Instance
}

func (b *deployReports) Deploy(context.Context, stack.Function) error {
	b.Events().Ready(b.inst)
	return nil
}

// A replica that starts while the function's instances already run (a
// new follower after a leader handover) is told of them while it deploys
// the function, once each: it keeps them, and serves on the slots the
// leader grants it, rather than queueing every request for good.
func TestFollowerAdoptsInstancesReportedWhileItDeploys(t *testing.T) {
	f := decl("f", 50)
	inst := backend.Instance{ID: "f-pod-1", Function: f.Ref(), Addr: "127.0.0.1:1"}
	be := &deployReports{followBackend: followBackend{Backend: dispatchtest.New(false)}, inst: inst}
	n := newNode(t, dispatch.Config{Tick: time.Millisecond}, be, f)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	rep, err := n.Sync(Grant{Slots: map[string]int{inst.ID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Functions[f.Ref()].Held[inst.ID]; got != 1 {
		t.Fatalf("the follower holds %d slots of %s after a grant of 1: it did not keep the instance its backend reported (report %+v)",
			got, inst.ID, rep.Functions[f.Ref()])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := n.Acquire(ctx, req(f.Ref()))
	if err != nil {
		t.Fatalf("a request at the follower found no slot: %v", err)
	}
	if lease.Instance.ID != inst.ID {
		t.Errorf("ran on %s, want %s", lease.Instance.ID, inst.ID)
	}
	lease.Release(time.Millisecond, 1)
}
