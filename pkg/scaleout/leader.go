package scaleout

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// peerWait is how long a new leader waits for a replica's first report
// before it grants slots that replica might still hold under the previous
// leader's grant. A replica still unheard of after it is treated as
// holding what it last reported (nothing, if it never did): its pod is
// wedged or partitioned, and Kubernetes will take it out of the endpoints
// once its readiness probe fails.
const peerWait = 5 * time.Second

// leader is the part of the replica that decides for every replica: its
// dispatcher plans with their queues and running requests counted, and it
// shares each instance's slots among them (share.go).
type leader struct {
	dispatch.Solo
	since time.Time
	// named is set once the replicas have been named (setPeers). Until
	// they have been and each has reported, for at most peerWait, a
	// replica the leader has not heard from may hold slots the previous
	// leader granted it: the leader then grants no free slot and retires
	// no instance. waiting is that state as last found (unsettled).
	named, waiting bool
	peers          map[string]*peer
	// queued counts, per function, the requests queued at the other
	// replicas, and remote, per instance, those they run there, as their
	// latest reports say (refresh).
	queued map[string]int
	remote map[string]int
}

// peer is the leader's state for one follower.
type peer struct {
	id    string
	acked uint64
	seen  bool
	fns   map[string]*FunctionReport
	// grant is what the follower may use per instance, as last decided.
	grant map[string]int
	// sent is the most of every grant sent since the last report folded
	// in: a follower may have applied any of them, so until it reports,
	// it may hold that much.
	sent map[string]int
	// granted is the grant the follower said it applies, at its last
	// report.
	granted map[string]int
}

// holds is what the follower may be using on instance id: the current
// decision, anything sent it has not confirmed, what it confirmed, and
// what it runs there past its grant.
func (p *peer) holds(fr *FunctionReport, id string) int {
	h := max(p.grant[id], p.sent[id], p.granted[id])
	if fr != nil {
		h = max(h, fr.Held[id])
	}
	return h
}

func newLeader(now time.Time) *leader {
	return &leader{since: now, waiting: true, peers: map[string]*peer{}, queued: map[string]int{}, remote: map[string]int{}}
}

func (*leader) role() Role { return Leader }

// Slots is none on a new instance: share grants them.
func (*leader) Slots(string, int) int { return 0 }

func (ld *leader) Queued(fn string) int  { return ld.queued[fn] }
func (ld *leader) Running(id string) int { return ld.remote[id] }

// Holds reports whether another replica may still use a slot of id: any
// may, while the leader is new and has not heard from every replica.
func (ld *leader) Holds(fn, id string) bool {
	if ld.waiting {
		return true
	}
	for _, p := range ld.peers {
		if p.holds(p.fns[fn], id) > 0 {
			return true
		}
	}
	return false
}

// Requests adds the other replicas' requests to the leader's view of fn:
// their queues, and what they run.
func (ld *leader) Requests(fn string, running bool, add func(bool, dispatch.Item)) {
	for _, id := range slices.Sorted(maps.Keys(ld.peers)) {
		fr := ld.peers[id].fns[fn]
		if fr == nil {
			continue
		}
		for _, it := range fr.Queue {
			add(true, dispatch.Item(it))
		}
		if !running {
			continue
		}
		for _, it := range fr.Running {
			add(false, dispatch.Item(it))
		}
	}
}

// Changed reshares fn's slots: an instance is new, or draining.
func (ld *leader) Changed(l dispatch.Locked, fn string) { ld.share(l, fn) }

// Planned stops what has drained and reshares after every tick.
func (ld *leader) Planned(l dispatch.Locked) {
	l.StopDrained()
	ld.shareAll(l)
}

// unsettled reports whether a replica the leader has not heard from may
// still hold slots the previous leader granted it.
func (ld *leader) unsettled(l dispatch.Locked) bool {
	ld.waiting = false
	if l.Now().Sub(ld.since) >= peerWait {
		return false
	}
	ld.waiting = !ld.named
	for _, p := range ld.peers {
		ld.waiting = ld.waiting || !p.seen
	}
	return ld.waiting
}

func (ld *leader) setPeers(l dispatch.Locked, ids []string) {
	ld.named = true
	keep := map[string]bool{}
	for _, id := range ids {
		keep[id] = true
		if ld.peers[id] == nil {
			ld.peers[id] = &peer{id: id, grant: map[string]int{}, sent: map[string]int{}}
		}
	}
	changed := false
	for id := range ld.peers {
		if !keep[id] {
			delete(ld.peers, id)
			changed = true
		}
	}
	if changed {
		ld.refresh(l)
		ld.shareAll(l)
		l.StopDrained()
	}
}

func (ld *leader) grantFor(id string) (Grant, bool) {
	p := ld.peers[id]
	if p == nil {
		return Grant{}, false
	}
	for id, n := range p.grant {
		p.sent[id] = max(p.sent[id], n)
	}
	return Grant{Ack: p.acked, Slots: maps.Clone(p.grant)}, true
}

func (ld *leader) fold(l dispatch.Locked, id string, r Report) error {
	p := ld.peers[id]
	if p == nil || l.Closed() {
		return nil
	}
	fns := l.Functions()
	if err := checkReport(fns, id, r); err != nil {
		return err
	}
	fresh := r.Seq > p.acked
	p.acked = max(p.acked, r.Seq)
	p.seen = true
	p.fns = r.Functions
	// The report was made after the follower applied the grant of its
	// own exchange, which replaced every earlier one: syncs with one
	// follower run one at a time.
	clear(p.sent)
	p.granted = r.Granted
	ld.refresh(l)
	for name, fr := range r.Functions {
		if _, ok := fns[name]; ok && fr != nil && fresh {
			l.Observe(name, arrivals(fr), executions(fr))
		}
	}
	ld.shareAll(l)
	l.StopDrained()
	return nil
}

// arrivals is a report's arrivals, with those whose size was lost taking
// the mean of the sizes that came.
func arrivals(fr *FunctionReport) []float64 {
	mean := 0.0
	for _, s := range fr.Arrivals {
		mean += s / float64(len(fr.Arrivals))
	}
	lost := min(fr.Lost, maxPeerSamples)
	if mean == 0 || lost <= 0 {
		return fr.Arrivals
	}
	out := slices.Grow(slices.Clone(fr.Arrivals), lost)
	for range lost {
		out = append(out, mean)
	}
	return out
}

func executions(fr *FunctionReport) []dispatch.Sample {
	out := make([]dispatch.Sample, len(fr.Executions))
	for i, e := range fr.Executions {
		out[i] = dispatch.Sample(e)
	}
	return out
}

// checkReport refuses a report before anything of it is kept.
func checkReport(fns map[string]stack.Function, id string, r Report) error {
	if len(r.Granted) > maxGrantInstances {
		return fmt.Errorf("report from %s echoes a grant on %d instances, more than %d", id, len(r.Granted), maxGrantInstances)
	}
	if len(r.Functions) > len(fns) {
		return fmt.Errorf("report from %s names %d functions; %d are deployed", id, len(r.Functions), len(fns))
	}
	for name, fr := range r.Functions {
		decl, ok := fns[name]
		if !ok || fr == nil {
			continue // deployed at the peer, not yet here: its next report counts
		}
		if err := checkFunctionReport(decl, fr); err != nil {
			return fmt.Errorf("report from %s: function %s: %w", id, name, err)
		}
	}
	return nil
}

func checkFunctionReport(decl stack.Function, fr *FunctionReport) error {
	switch {
	case len(fr.Arrivals) > maxPeerSamples*maxUnacked || len(fr.Executions) > maxPeerSamples*maxUnacked:
		return fmt.Errorf("%d arrivals and %d executions, more than %d", len(fr.Arrivals), len(fr.Executions), maxPeerSamples*maxUnacked)
	case len(fr.Queue) > decl.MaxQueue:
		return fmt.Errorf("%d queued, more than the bound %d", len(fr.Queue), decl.MaxQueue)
	case len(fr.Held) > maxGrantInstances || len(fr.Running) > maxGrantInstances:
		return fmt.Errorf("%d instances held, %d running, more than %d", len(fr.Held), len(fr.Running), maxGrantInstances)
	case fr.Lost < 0:
		return fmt.Errorf("lost %d must not be negative", fr.Lost)
	}
	for _, s := range fr.Arrivals {
		if !(s > 0) || math.IsInf(s, 1) {
			return fmt.Errorf("arrival size %v must be positive and finite", s)
		}
	}
	for _, h := range fr.Held {
		if h < 0 {
			return fmt.Errorf("%d slots held must not be negative", h)
		}
	}
	return nil
}

// refresh recounts, from the peers' latest reports, each function's
// requests queued at other replicas and each instance's requests running
// there.
func (ld *leader) refresh(l dispatch.Locked) {
	clear(ld.queued)
	clear(ld.remote)
	fns := l.Functions()
	for _, p := range ld.peers {
		for name, fr := range p.fns {
			if _, ok := fns[name]; !ok || fr == nil {
				continue
			}
			ld.queued[name] += len(fr.Queue)
			for _, it := range fr.Running {
				if in, ok := l.Instance(it.Instance); ok && in.Function == name {
					ld.remote[it.Instance]++
				}
			}
		}
	}
}
