package scaleout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/dispatch/dispatchtest"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
)

// gateways is a leader and followers in one process: the leader's backend
// tells every follower of the instances it starts and stops, as their
// own backends would from the EndpointSlices, and sync exchanges a grant
// and a report with one follower.
type gateways struct {
	be        *dispatchtest.Backend
	leader    *node
	followers map[string]*node
	// lose drops a report on its way back, as a timed-out sync would.
	lose func() bool
}

func newReplicas(t *testing.T, cfg dispatch.Config, n int, fns ...stack.Function) *gateways {
	t.Helper()
	rs := &gateways{be: dispatchtest.New(true), followers: map[string]*node{}, lose: func() bool { return false }}
	rs.leader = newNode(t, cfg, rs.be, fns...)
	for i := range n {
		fcfg := cfg
		fcfg.NewPolicy = nil
		fb := &followBackend{Backend: dispatchtest.New(false)}
		rs.followers[fmt.Sprintf("gw-%d", i)] = newNode(t, fcfg, fb, fns...)
		rs.be.Mirror(fb.Events())
	}
	if err := rs.leader.Lead(); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, n)
	for id := range rs.followers {
		ids = append(ids, id)
	}
	if err := rs.leader.SetPeers(ids); err != nil {
		t.Fatal(err)
	}
	return rs
}

// node is one replica: its dispatcher and the layer over it.
type node struct {
	*dispatch.Dispatcher
	*Replica
}

func newNode(t *testing.T, cfg dispatch.Config, be backend.Backend, fns ...stack.Function) *node {
	t.Helper()
	r := NewReplica()
	cfg.Peers = r
	d, err := dispatch.New(cfg, be)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Load(context.Background(), &stack.Stack{Functions: fns}); err != nil {
		t.Fatal(err)
	}
	return &node{Dispatcher: d, Replica: r}
}

func decl(name string, crit int) stack.Function { return dispatchtest.Function(name, crit) }

func req(fn string) dispatch.Request {
	return dispatch.Request{Function: fn, Size: 100, Deadline: time.Now().Add(time.Second)}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	dispatchtest.WaitFor(t, cond)
}

func (rs *gateways) sync(t *testing.T, id string) {
	g, ok := rs.leader.GrantFor(id)
	if !ok {
		t.Errorf("the leader has no grant for %s", id)
		return
	}
	rep, err := rs.followers[id].Sync(g)
	if err != nil {
		t.Errorf("sync %s: %v", id, err)
		return
	}
	if rs.lose() {
		return
	}
	if err := rs.leader.Fold(id, rep); err != nil {
		t.Errorf("fold %s: %v", id, err)
	}
}

func (rs *gateways) syncAll(t *testing.T) {
	for id := range rs.followers {
		rs.sync(t, id)
	}
}

// followBackend is a follower's: the test's leader backend reports its
// instances, and a follower never asks for any.
type followBackend struct{ *dispatchtest.Backend }

func (b *followBackend) Start(fn string, n int) {
	panic(fmt.Sprintf("a follower started %d of %s", n, fn))
}
func (b *followBackend) Stop(backend.Instance) {}

// The point of slots: requests from every replica at once, instances
// coming and going, grants moving with demand, reports lost on the way,
// and still no instance ever runs more requests than its concurrency,
// and every request is served.
func TestReplicasNeverOverloadAnInstance(t *testing.T) {
	f := decl("f", 50)
	f.Concurrency = 2
	f.MaxScale = 6
	f.MaxQueue = 100000
	rs := newReplicas(t, dispatch.Config{Tick: time.Millisecond, IdleTimeout: 20 * time.Millisecond}, 2, f)
	var lost atomic.Int64
	rs.lose = func() bool { return lost.Add(1)%9 == 0 }
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go rs.leader.Run(ctx)
	go func() {
		for ctx.Err() == nil {
			rs.syncAll(t)
			// Stronger than what the workers see: the slots every replica
			// may use, or uses past its grant, never add up to more than
			// the instance has.
			total := map[string]int{}
			for _, d := range []*node{rs.leader, rs.followers["gw-0"], rs.followers["gw-1"]} {
				for id, n := range slotsOf(d) {
					total[id] += n
				}
			}
			for id, n := range total {
				if n > f.Concurrency {
					t.Errorf("instance %s: replicas hold %d slots (leader %v, followers %v %v)", id, n, slotsOf(rs.leader), slotsOf(rs.followers["gw-0"]), slotsOf(rs.followers["gw-1"]))
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()

	var mu sync.Mutex
	inflight := map[string]int{}
	worst := 0
	ds := []*node{rs.leader, rs.followers["gw-0"], rs.followers["gw-1"]}
	var wg sync.WaitGroup
	var served atomic.Int64
	const workers, each = 24, 40
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range each {
				// Replicas get uneven, shifting load, so slots must move.
				d := ds[r.IntN(len(ds))]
				if w%3 == 0 {
					d = ds[0]
				}
				actx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				l, err := d.Acquire(actx, req("f"))
				cancel()
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				mu.Lock()
				inflight[l.Instance.ID]++
				worst = max(worst, inflight[l.Instance.ID])
				mu.Unlock()
				time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
				mu.Lock()
				inflight[l.Instance.ID]--
				mu.Unlock()
				l.Release(time.Duration(100+r.IntN(200))*time.Microsecond, 10)
				served.Add(1)
			}
		}()
	}
	wg.Wait()
	if worst > f.Concurrency {
		t.Fatalf("an instance ran %d requests at once; its concurrency is %d", worst, f.Concurrency)
	}
	if served.Load() != workers*each {
		t.Fatalf("served %d of %d", served.Load(), workers*each)
	}
	for id, d := range rs.followers {
		st, _ := d.Function("f")
		if st.Stats.Accepted == 0 || st.Stats.Completed != st.Stats.Accepted {
			t.Errorf("%s: %+v", id, st.Stats)
		}
	}
}

// countingPolicy counts what reaches the leader's policy.
type countingPolicy struct {
	policy.Policy
	arrivals, completions atomic.Int64
}

// Caps are the wrapped policy's but for the hooks the wrapper hides.
func (c *countingPolicy) Caps() policy.Caps {
	caps := c.Policy.Caps()
	caps.ColdStart, caps.LookAhead, caps.Refusals = false, false, false
	return caps
}

func (c *countingPolicy) Arrive(now time.Time, fn int, size float64, n policy.Counts) int {
	c.arrivals.Add(1)
	return c.Policy.Arrive(now, fn, size, n)
}

func (c *countingPolicy) Complete(fn int, size float64, exec time.Duration, out float64) error {
	c.completions.Add(1)
	return c.Policy.Complete(fn, size, exec, out)
}

// Every arrival and execution at a follower reaches the leader's policy
// exactly once, even when reports are lost on the way back: the follower
// sends what the leader has not acknowledged again.
func TestFollowerSamplesReachTheLeaderOnce(t *testing.T) {
	var pol *countingPolicy
	cfg := dispatch.Config{NewPolicy: func(name string, spec policy.Spec) (policy.Policy, error) {
		p, err := policy.New(name, spec)
		pol = &countingPolicy{Policy: p}
		return pol, err
	}}
	f := decl("f", 0)
	f.MinScale = 1
	rs := newReplicas(t, cfg, 1, f)
	fol := rs.followers["gw-0"]
	// One instance, which the follower gets a slot on: the leader has no
	// demand of its own.
	rs.leader.Plan()
	waitFor(t, func() bool { st, _ := fol.Function("f"); return st.Available == 1 })
	var lost atomic.Int64
	rs.lose = func() bool { return lost.Add(1)%2 == 0 }
	base := pol.arrivals.Load()
	ctx, stop := context.WithCancel(context.Background())
	syncing := make(chan struct{})
	go func() {
		defer close(syncing)
		for ctx.Err() == nil {
			rs.syncAll(t)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	const n = 25
	for range n {
		actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := fol.Acquire(actx, req("f"))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		l.Release(time.Millisecond, 10)
	}
	stop()
	<-syncing
	rs.lose = func() bool { return false }
	for range 2 {
		rs.syncAll(t)
	}
	if got := pol.arrivals.Load() - base; got != n {
		t.Errorf("the leader's policy saw %d of the follower's %d arrivals", got, n)
	}
	if got := pol.completions.Load(); got != n {
		t.Errorf("the leader's policy saw %d of the follower's %d executions", got, n)
	}
}

// A follower asks for no instance: a request there with none waits for
// the leader, which sees it queued in the report and starts one.
func TestTheLeaderStartsInstancesForAFollowersQueue(t *testing.T) {
	f := decl("f", 0)
	f.MinScale = 0
	rs := newReplicas(t, dispatch.Config{}, 1, f)
	fol := rs.followers["gw-0"]
	got := serveOne(fol)
	waitFor(t, func() bool { st, _ := fol.Function("f"); return st.Queued == 1 })
	if rs.be.Started("f") != 0 {
		t.Fatal("started an instance before the leader heard of the request")
	}
	rs.syncUntilServed(t, got)
	if rs.be.Started("f") == 0 {
		t.Fatal("served without the leader starting an instance")
	}
}

// syncUntilServed syncs every follower and plans, as the leader's rounds
// and ticks would, until the request behind got has been served.
func (rs *gateways) syncUntilServed(t *testing.T, got <-chan error) {
	t.Helper()
	waitFor(t, func() bool {
		rs.syncAll(t)
		rs.leader.Plan()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
			return true
		default:
			return false
		}
	})
}

// What would make replicas disagree is refused on every replica, and a
// sync reaches only followers.
func TestScaledOutRefusesWhatOnlyOneReplicaCouldDo(t *testing.T) {
	f := decl("f", 0)
	rs := newReplicas(t, dispatch.Config{}, 1, f)
	for name, d := range map[string]*node{"leader": rs.leader, "follower": rs.followers["gw-0"]} {
		g := decl("g", 0)
		for what, err := range map[string]error{
			"deploy": d.Deploy(context.Background(), g),
			"update": d.Update(context.Background(), f),
			"remove": d.Remove(context.Background(), "f"),
			"scale":  d.Scale("f", 3),
			"app":    d.DeployApp(stack.App{Name: "a", Functions: []string{"f"}}),
		} {
			if !errors.Is(err, ErrScaledOut) {
				t.Errorf("%s: %s = %v, want ErrScaledOut", name, what, err)
			}
		}
	}
	if _, err := rs.leader.Sync(Grant{}); !errors.Is(err, ErrNotFollower) {
		t.Errorf("sync to the leader = %v", err)
	}
	if _, err := rs.followers["gw-0"].Sync(Grant{Slots: map[string]int{"x": -1}}); err == nil {
		t.Error("a negative grant was accepted")
	}
	if err := rs.leader.Fold("gw-0", Report{Functions: map[string]*FunctionReport{"f": {Arrivals: []float64{-1}}}}); err == nil {
		t.Error("a negative arrival size was accepted")
	}
	if err := rs.leader.Lead(); err == nil {
		t.Error("a leader led again")
	}
}

// slotsOf is what each instance's slots look like from one replica.
func slotsOf(n *node) map[string]int {
	out := map[string]int{}
	n.WithLock(func(l dispatch.Locked) {
		for name := range l.Functions() {
			for _, in := range l.Instances(name) {
				if !in.Gone {
					out[in.ID] = max(in.Slots, in.Running)
				}
			}
		}
	})
	return out
}

// Scaling down, the leader does not stop an idle instance that another
// replica may still send to: it withdraws the grant and stops the
// instance once that replica reports letting go.
func TestTheLeaderRetiresAnInstanceOnlyOnceNoReplicaHoldsIt(t *testing.T) {
	f := decl("f", 0)
	f.MinScale = 0
	// The clock stands still until the test moves it, so the instance
	// turns idle for long enough only once the leader knows it is idle.
	start, elapsed := time.Now(), atomic.Int64{}
	now := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	rs := newReplicas(t, dispatch.Config{IdleTimeout: time.Millisecond, Now: now}, 1, f)
	fol := rs.followers["gw-0"]
	// A request at the follower: the leader starts an instance for it and
	// grants the follower its slot.
	rs.syncUntilServed(t, serveOne(fol))
	// The leader hears that the request finished: a report taken while
	// it ran would keep the instance busy, and not idle, in its eyes.
	rs.syncAll(t)
	inst := rs.be.ReadyList()[0].ID
	// The follower's report still says it holds the slot; the leader's
	// idle reclaim drains the instance instead of stopping it.
	rs.leader.WithLock(func(dispatch.Locked) {
		rs.leader.part.(*leader).peers["gw-0"].granted = map[string]int{inst: 1}
	})
	elapsed.Add(int64(2 * time.Millisecond))
	rs.leader.Plan()
	if len(rs.be.Stopped()) != 0 {
		t.Fatal("stopped an instance a follower still held a slot on")
	}
	if g, _ := rs.leader.GrantFor("gw-0"); g.Slots[inst] != 0 {
		t.Fatalf("the draining instance is still granted: %v", g.Slots)
	}
	// The follower takes the withdrawn grant and reports; then it stops.
	rs.syncAll(t)
	waitFor(t, func() bool {
		stopped := rs.be.Stopped()
		return len(stopped) == 1 && stopped[0] == inst
	})
}

// serveOne sends one request to d in the background; the channel yields
// its outcome once it has run (or failed).
func serveOne(d *node) <-chan error {
	got := make(chan error, 1)
	go func() {
		l, err := d.Acquire(context.Background(), req("f"))
		if err == nil {
			l.Release(time.Millisecond, 1)
		}
		got <- err
	}()
	return got
}

// The leader goes and a follower takes over, while another follower
// still runs a request on a slot the old leader granted it. The new
// leader knows nothing of that until the replicas are named and that one
// reports: before, it grants itself no slot it did not hold and retires
// nothing, so the instance never runs more than its concurrency (the
// flake of TestScaledOutGatewayTwoReplicas: an instance ran 3 requests at
// concurrency 2 right after the leader replica was deleted).
func TestANewLeaderGrantsNoSlotAnotherReplicaMayHold(t *testing.T) {
	f := decl("f", 0)
	f.Concurrency, f.MinScale, f.MaxScale = 2, 1, 1
	rs := newReplicas(t, dispatch.Config{}, 2, f)
	busy, heir := rs.followers["gw-0"], rs.followers["gw-1"]
	// Both slots of the one instance go to gw-0, which has the demand.
	rs.leader.Plan()
	waitFor(t, func() bool { return len(rs.be.ReadyList()) == 1 })
	inst := rs.be.ReadyList()[0].ID
	got := make(chan *dispatch.Lease, 2)
	for range 2 {
		go func() {
			l, err := busy.Acquire(context.Background(), req("f"))
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
	}
	waitFor(t, func() bool { rs.syncAll(t); rs.leader.Plan(); return len(got) == 2 })
	held := <-got
	(<-got).Release(time.Millisecond, 1)
	rs.syncAll(t)
	// The old leader is gone; gw-1 leads and ticks before it has named
	// the replicas, then before gw-0 has reported.
	if err := heir.Lead(); err != nil {
		t.Fatal(err)
	}
	overload := func(when string) {
		t.Helper()
		if n := slotsOf(heir)[inst] + slotsOf(busy)[inst]; n > f.Concurrency {
			t.Errorf("%s: the replicas hold %d slots of %s (new leader %v, gw-0 %v); its concurrency is %d",
				when, n, inst, slotsOf(heir), slotsOf(busy), f.Concurrency)
		}
	}
	heir.Plan()
	overload("before the replicas are named")
	if err := heir.SetPeers([]string{"gw-0"}); err != nil {
		t.Fatal(err)
	}
	heir.Plan()
	overload("before gw-0 reports")
	if len(rs.be.Stopped()) != 0 {
		t.Fatal("the new leader stopped an instance another replica runs a request on")
	}
	// gw-0 reports what it runs: the new leader shares the free slot.
	g, _ := heir.GrantFor("gw-0")
	rep, err := busy.Sync(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := heir.Fold("gw-0", rep); err != nil {
		t.Fatal(err)
	}
	heir.Plan()
	overload("after gw-0 reports")
	// And it serves: a request at the new leader gets a slot once gw-0
	// lets go of its own.
	held.Release(time.Millisecond, 1)
	served := serveOne(heir)
	waitFor(t, func() bool {
		g, _ := heir.GrantFor("gw-0")
		rep, err := busy.Sync(g)
		if err == nil {
			err = heir.Fold("gw-0", rep)
		}
		if err != nil {
			t.Fatal(err)
		}
		heir.Plan()
		overload("sharing anew")
		select {
		case err := <-served:
			if err != nil {
				t.Fatal(err)
			}
			return true
		default:
			return false
		}
	})
}
