package dispatch

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

// A scaled-out gateway is several replicas, each with its own dispatcher
// and queues, in front of the same instances. One replica, the leader,
// runs the policy for all of them, the way Knative's autoscaler decides
// from the statistics it scrapes off every queue-proxy: every sync it
// sends each follower a Grant and gets back a Report. The Report carries
// the follower's arrivals and executions (the profiler's and predictor's
// samples), its queue and what it runs; the Grant says how many slots of
// each instance the follower may use.
//
// Slots are what keep two replicas from overloading one instance. The
// leader hands an instance's Concurrency slots out so that they never add
// up to more than Concurrency, and it counts a slot free only once the
// replica that held it has reported, after applying a lowered grant, that
// it no longer holds it. A slot therefore moves from one replica to
// another over one sync round, and at no moment do two replicas both
// believe they may use it. Slots follow demand (queued plus running
// requests at each replica); a replica with any demand gets at least one
// slot while there are as many slots as replicas with demand, and the
// policy, which sees every replica's queue, adds instances when there are
// not.

// Role is a dispatcher's part in a scaled-out gateway.
type Role int

const (
	// Solo is a gateway alone: it decides, and uses every slot of every
	// instance. The default.
	Solo Role = iota
	// Follower routes only. Its instances are the ones the backend reports
	// (it asks for none), it uses the slots the leader grants, and it
	// hands its samples and queue to the leader at every Sync.
	Follower
	// Leader decides for every replica from their Reports, starts and
	// stops instances, and grants slots. A follower becomes one with Lead.
	Leader
)

func (r Role) String() string {
	switch r {
	case Solo:
		return "solo"
	case Follower:
		return "follower"
	case Leader:
		return "leader"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

var (
	// ErrScaledOut refuses what only one replica may do, or what would make
	// the replicas disagree: deploying functions over the API (they come
	// from the stack file every replica loads) and scaling by hand.
	ErrScaledOut = errors.New("this gateway is one of several replicas: functions come from the stack file and the leader scales")
	// ErrNotFollower answers a Sync sent to a replica that leads, or to a
	// gateway that is not scaled out.
	ErrNotFollower = errors.New("this gateway replica does not follow")
)

// Bounds on what one Sync carries, checked before anything is kept.
const (
	// maxPeerSamples bounds the arrivals, and separately the executions, a
	// follower keeps per function for the leader. Arrivals past it are
	// counted in Lost; executions past it are not kept (the profiler has
	// plenty).
	maxPeerSamples = 20000
	// maxUnacked bounds the batches a follower keeps for a leader that has
	// not acknowledged them; the oldest goes first, its arrivals counted.
	maxUnacked = 16
	// maxGrantInstances bounds the instances one Grant names.
	maxGrantInstances = 100000
	// maxPeers bounds the replicas a leader syncs with.
	maxPeers = 256
)

// peerWait is how long a new leader waits for a replica's first report
// before it grants slots that replica might still hold under the previous
// leader's grant. A replica still unheard of after it is treated as
// holding what it last reported (nothing, if it never did): its pod is
// wedged or partitioned, and Kubernetes will take it out of the endpoints
// once its readiness probe fails.
const peerWait = 5 * time.Second

// Grant is what the leader sends a follower at a sync.
type Grant struct {
	// Ack is the Seq of the newest Report the leader has folded in; the
	// follower forgets the samples up to it and sends the rest again.
	Ack uint64 `json:"ack"`
	// Slots maps an instance (its ID) to the slots the follower may use
	// on it. An instance not named has none.
	Slots map[string]int `json:"slots"`
}

// Report is what a follower answers a Grant with.
type Report struct {
	// Seq numbers the newest samples in the report.
	Seq       uint64                     `json:"seq"`
	Functions map[string]*FunctionReport `json:"functions"`
	// Granted echoes the grant the follower applies now, instances it has
	// not seen yet included: it may use those slots as soon as it does.
	Granted map[string]int `json:"granted,omitempty"`
}

// FunctionReport is one function at one follower.
type FunctionReport struct {
	// Arrivals are the input sizes of the requests accepted since the
	// samples the leader acknowledged; Lost counts those whose size was
	// not kept (past maxPeerSamples).
	Arrivals []float64 `json:"arrivals,omitempty"`
	Lost     int       `json:"lost,omitempty"`
	// Executions are the executions finished since then.
	Executions []Execution `json:"executions,omitempty"`
	// Queue and Running are the function's requests right now.
	Queue   []PeerItem `json:"queue,omitempty"`
	Running []PeerItem `json:"running,omitempty"`
	// Held maps each instance to the slots the follower holds on it: the
	// most of its grant and what it runs there.
	Held map[string]int `json:"held,omitempty"`
}

// Execution is one profiler sample.
type Execution struct {
	Size   float64       `json:"size"`
	Exec   time.Duration `json:"exec"`
	Output float64       `json:"output"`
}

// PeerItem is one request at a follower.
type PeerItem struct {
	Size float64 `json:"size"`
	// Age is the time queued, or running.
	Age      time.Duration `json:"age"`
	Instance string        `json:"instance,omitempty"`
}

// batch is a follower's samples cut at one Sync.
type batch struct {
	seq uint64
	fns map[string]*samples
}

type samples struct {
	arrivals   []float64
	lost       int
	executions []Execution
}

func (s *samples) arrive(size float64) {
	if len(s.arrivals) < maxPeerSamples {
		s.arrivals = append(s.arrivals, size)
	} else {
		s.lost++
	}
}

// follower is a Follower's state for the leader.
type follower struct {
	seq     uint64
	acc     map[string]*samples
	unacked []batch
	// slots is the latest grant, kept for instances the backend has not
	// reported yet.
	slots map[string]int
}

// peer is a Leader's state for one follower.
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

// Role is the dispatcher's part in a scaled-out gateway.
func (d *Dispatcher) Role() Role {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.role
}

func (d *Dispatcher) scaledOut() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.role != Solo
}

// lockedRecordArrival keeps an accepted request's size for the leader.
func (d *Dispatcher) lockedRecordArrival(fn *function, size float64) {
	if d.role == Follower {
		d.fol.samples(fn.decl.Name).arrive(size)
	}
}

// lockedRecordExecution keeps a finished execution for the leader.
func (d *Dispatcher) lockedRecordExecution(fn *function, e Execution) {
	if d.role != Follower {
		return
	}
	s := d.fol.samples(fn.decl.Name)
	if len(s.executions) < maxPeerSamples {
		s.executions = append(s.executions, e)
	}
}

func (f *follower) samples(name string) *samples {
	s := f.acc[name]
	if s == nil {
		s = &samples{}
		f.acc[name] = s
	}
	return s
}

// Sync is a follower's side of one exchange with the leader: it applies
// the grant to its instances and reports.
func (d *Dispatcher) Sync(g Grant) (Report, error) {
	if len(g.Slots) > maxGrantInstances {
		return Report{}, fmt.Errorf("%w: grant names %d instances, more than %d", stack.ErrInvalid, len(g.Slots), maxGrantInstances)
	}
	for id, n := range g.Slots {
		if n < 0 {
			return Report{}, fmt.Errorf("%w: grant of %d slots on instance %q must not be negative", stack.ErrInvalid, n, id)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.role != Follower || d.closed {
		return Report{}, ErrNotFollower
	}
	now := d.cfg.Now()
	f := d.fol
	f.slots = maps.Clone(g.Slots)
	for _, in := range d.byID {
		in.slots = min(g.Slots[in.ID], in.fn.decl.Concurrency)
		d.lockedFeed(in, now)
	}
	f.unacked = slices.DeleteFunc(f.unacked, func(b batch) bool { return b.seq <= g.Ack })
	if len(f.acc) > 0 {
		f.seq++
		f.unacked = append(f.unacked, batch{seq: f.seq, fns: f.acc})
		f.acc = map[string]*samples{}
	}
	if len(f.unacked) > maxUnacked {
		// The leader is not acknowledging: keep the newest, and count the
		// arrivals of the oldest so the load is not underestimated.
		old := f.unacked[0]
		f.unacked = f.unacked[1:]
		for name, s := range old.fns {
			nb := f.unacked[0].fns
			if nb[name] == nil {
				nb[name] = &samples{}
			}
			nb[name].lost += len(s.arrivals) + s.lost
		}
	}
	r := Report{Seq: f.seq, Functions: make(map[string]*FunctionReport, len(d.fns)), Granted: maps.Clone(f.slots)}
	for name, fn := range d.fns {
		fr := d.lockedFunctionReport(fn, now)
		for _, b := range f.unacked {
			if s := b.fns[name]; s != nil {
				fr.Arrivals = append(fr.Arrivals, s.arrivals...)
				fr.Lost += s.lost
				fr.Executions = append(fr.Executions, s.executions...)
			}
		}
		r.Functions[name] = fr
	}
	return r, nil
}

func (d *Dispatcher) lockedFunctionReport(fn *function, now time.Time) *FunctionReport {
	fr := &FunctionReport{Held: map[string]int{}}
	for _, q := range fn.queue.Ordered(nil) {
		fr.Queue = append(fr.Queue, PeerItem{Size: q.Value.size, Age: time.Duration(d.nanos(now) - q.Enq)})
	}
	for _, in := range fn.ready {
		for _, c := range in.running {
			fr.Running = append(fr.Running, PeerItem{Size: c.size, Age: now.Sub(c.started), Instance: in.ID})
		}
		if h := max(in.slots, len(in.running)); h > 0 {
			fr.Held[in.ID] = h
		}
	}
	return fr
}

// Lead makes a follower the leader: from now on it decides for every
// replica. The instances it follows stay, with the slots it was granted,
// until the first reports let it share them anew.
func (d *Dispatcher) Lead() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.role != Follower {
		return fmt.Errorf("only a follower can lead; this dispatcher is %v", d.role)
	}
	d.role = Leader
	d.fol = nil
	d.leadSince = d.cfg.Now()
	d.peers = map[string]*peer{}
	return nil
}

// SetPeers names the other replicas the leader decides for. A replica no
// longer named is gone: what it held is free again.
func (d *Dispatcher) SetPeers(ids []string) error {
	if len(ids) > maxPeers {
		return fmt.Errorf("%d peers, more than %d", len(ids), maxPeers)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.role != Leader {
		return nil
	}
	keep := map[string]bool{}
	for _, id := range ids {
		keep[id] = true
		if d.peers[id] == nil {
			d.peers[id] = &peer{id: id, grant: map[string]int{}, sent: map[string]int{}}
		}
	}
	changed := false
	for id := range d.peers {
		if !keep[id] {
			delete(d.peers, id)
			changed = true
		}
	}
	if changed {
		d.lockedRefreshRemote()
		d.lockedShareAll(d.cfg.Now())
		d.lockedStopDrained(d.cfg.Now())
	}
	return nil
}

// GrantFor is what the leader sends peer id at its next sync; false when
// this dispatcher does not lead or does not know the peer.
func (d *Dispatcher) GrantFor(id string) (Grant, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.peers[id]
	if d.role != Leader || p == nil {
		return Grant{}, false
	}
	for id, n := range p.grant {
		p.sent[id] = max(p.sent[id], n)
	}
	return Grant{Ack: p.acked, Slots: maps.Clone(p.grant)}, true
}

// Fold takes peer id's report: its new samples go to the policy (each
// arrival as if it had arrived here), its queue and running requests into
// the next plans, its holdings into the next shares.
func (d *Dispatcher) Fold(id string, r Report) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.peers[id]
	if d.role != Leader || p == nil || d.closed {
		return nil
	}
	if len(r.Granted) > maxGrantInstances {
		return fmt.Errorf("report from %s echoes a grant on %d instances, more than %d", id, len(r.Granted), maxGrantInstances)
	}
	if len(r.Functions) > len(d.fns) {
		return fmt.Errorf("report from %s names %d functions; %d are deployed", id, len(r.Functions), len(d.fns))
	}
	for name, fr := range r.Functions {
		fn := d.fns[name]
		if fn == nil || fr == nil {
			continue // deployed at the peer, not yet here: its next report counts
		}
		if err := checkReport(fn, fr); err != nil {
			return fmt.Errorf("report from %s: function %s: %w", id, name, err)
		}
	}
	now := d.cfg.Now()
	fresh := r.Seq > p.acked
	p.acked = max(p.acked, r.Seq)
	p.seen = true
	p.fns = r.Functions
	// The report was made after the follower applied the grant of its
	// own exchange, which replaced every earlier one: syncs with one
	// follower run one at a time.
	clear(p.sent)
	p.granted = r.Granted
	d.lockedRefreshRemote()
	for name, fr := range r.Functions {
		fn := d.fns[name]
		if fn == nil || fr == nil || !fresh {
			continue
		}
		d.lockedFoldSamples(fn, fr, now)
	}
	d.lockedShareAll(now)
	d.lockedStopDrained(now)
	return nil
}

func checkReport(fn *function, fr *FunctionReport) error {
	switch {
	case len(fr.Arrivals) > maxPeerSamples*maxUnacked || len(fr.Executions) > maxPeerSamples*maxUnacked:
		return fmt.Errorf("%d arrivals and %d executions, more than %d", len(fr.Arrivals), len(fr.Executions), maxPeerSamples*maxUnacked)
	case len(fr.Queue) > fn.decl.MaxQueue:
		return fmt.Errorf("%d queued, more than the bound %d", len(fr.Queue), fn.decl.MaxQueue)
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

// lockedFoldSamples feeds a peer's new samples to fn's policy: arrivals as
// they would have been fed here (scaling up at once if the policy says
// so), executions to the profiler. Arrivals whose size was lost take the
// mean of the sizes that came.
func (d *Dispatcher) lockedFoldSamples(fn *function, fr *FunctionReport, now time.Time) {
	pol := fn.g.pol
	mean := 0.0
	for _, s := range fr.Arrivals {
		add := pol.Arrive(now, fn.idx, s, fn.counts())
		d.lockedScaleUp(fn, add, now)
		mean += s / float64(len(fr.Arrivals))
	}
	if mean > 0 {
		for range min(fr.Lost, maxPeerSamples) {
			d.lockedScaleUp(fn, pol.Arrive(now, fn.idx, mean, fn.counts()), now)
		}
	}
	for _, e := range fr.Executions {
		if err := pol.Complete(fn.idx, e.Size, e.Exec, max(e.Output, minOutput)); err != nil {
			d.cfg.Logger.Warn("profiler rejected a peer's sample", "function", fn.decl.Name, "err", err)
		}
	}
	if len(fr.Arrivals) > 0 {
		d.lockedLookAhead(fn, now)
	}
}

// lockedRefreshRemote recomputes, from the peers' latest reports, each
// instance's requests running at other replicas and each function's
// requests queued there.
func (d *Dispatcher) lockedRefreshRemote() {
	for _, fn := range d.fns {
		fn.peerQueued = 0
		for _, in := range fn.ready {
			in.remote = 0
		}
	}
	for _, p := range d.peers {
		for name, fr := range p.fns {
			fn := d.fns[name]
			if fn == nil || fr == nil {
				continue
			}
			fn.peerQueued += len(fr.Queue)
			for _, it := range fr.Running {
				if in := d.byID[it.Instance]; in != nil && in.fn == fn {
					in.remote++
				}
			}
		}
	}
}

// lockedPeerView adds the other replicas' requests to a leader's view of
// fn: their queues, what they run, and the time until the slots they run
// on free up.
func (d *Dispatcher) lockedPeerView(fn *function, detailed bool, add func(queued bool, it PeerItem)) {
	for _, id := range slices.Sorted(maps.Keys(d.peers)) {
		fr := d.peers[id].fns[fn.decl.Name]
		if fr == nil {
			continue
		}
		for _, it := range fr.Queue {
			add(true, it)
		}
		if !detailed {
			continue
		}
		for _, it := range fr.Running {
			add(false, it)
		}
	}
}

// lockedPeersHold reports whether another replica may still use a slot
// of in.
func (d *Dispatcher) lockedPeersHold(in *instance) bool {
	for _, p := range d.peers {
		if p.holds(p.fns[in.fn.decl.Name], in.ID) > 0 {
			return true
		}
	}
	return false
}

func (d *Dispatcher) lockedShareAll(now time.Time) {
	for _, fn := range d.fns {
		d.lockedShare(fn, now)
	}
}

// self is the leader's own key among the shares' participants.
const self = ""

// lockedShare decides, on a leader, how many slots of each of fn's
// instances each replica may use, and applies its own share at once.
func (d *Dispatcher) lockedShare(fn *function, now time.Time) {
	if d.role != Leader {
		return
	}
	var insts []*instance
	for _, in := range fn.ready {
		if !in.draining && !in.gone {
			insts = append(insts, in)
		}
	}
	slices.SortFunc(insts, func(a, b *instance) int { return strings.Compare(a.ID, b.ID) })
	ids := append([]string{self}, slices.Sorted(maps.Keys(d.peers))...)
	c := fn.decl.Concurrency
	// held[p][i] is what replica p may be using on instance i: its grant,
	// or what it reported holding if more (a lowered grant it has not
	// applied yet, or requests still running past it).
	grant := make([][]int, len(ids))
	held := make([][]int, len(ids))
	demand := make([]int, len(ids))
	blocked := false
	for k, id := range ids {
		grant[k], held[k] = make([]int, len(insts)), make([]int, len(insts))
		if id == self {
			demand[k] = fn.queue.Len()
			for i, in := range insts {
				grant[k][i] = in.slots
				held[k][i] = max(in.slots, len(in.running))
				demand[k] += len(in.running)
			}
			continue
		}
		p := d.peers[id]
		if !p.seen && now.Sub(d.leadSince) < peerWait {
			blocked = true
		}
		fr := p.fns[fn.decl.Name]
		for i, in := range insts {
			grant[k][i] = p.grant[in.ID]
			held[k][i] = p.holds(fr, in.ID)
		}
		if fr != nil {
			demand[k] = len(fr.Queue) + len(fr.Running)
		}
	}
	target := shareTargets(demand, c*len(insts))
	running := func(k, i int) int {
		if ids[k] == self {
			return len(insts[i].running)
		}
		n := 0
		if fr := d.peers[ids[k]].fns[fn.decl.Name]; fr != nil {
			for _, it := range fr.Running {
				if it.Instance == insts[i].ID {
					n++
				}
			}
		}
		return n
	}
	// Lower the grants above target: idle slots first, then busy ones,
	// which free up as their requests finish.
	for k := range ids {
		excess := sum(grant[k]) - target[k]
		for pass := 0; pass < 2 && excess > 0; pass++ {
			for i := range insts {
				floor := 0
				if pass == 0 {
					floor = min(grant[k][i], running(k, i))
				}
				cut := min(excess, grant[k][i]-floor)
				if cut > 0 {
					grant[k][i] -= cut
					excess -= cut
				}
			}
		}
		if ids[k] == self {
			for i := range insts {
				held[k][i] = max(grant[k][i], len(insts[i].running))
			}
		}
	}
	// Raise the grants below target from slots nobody holds; not while a
	// replica the new leader has not heard from may still hold some.
	if !blocked {
		for k := range ids {
			short := target[k] - sum(grant[k])
			for i := range insts {
				if short <= 0 {
					break
				}
				free := c
				for j := range ids {
					free -= held[j][i]
				}
				if take := min(short, free); take > 0 {
					grant[k][i] += take
					held[k][i] = max(held[k][i], grant[k][i])
					short -= take
				}
			}
		}
	}
	for k, id := range ids {
		if id == self {
			for i, in := range insts {
				in.slots = grant[k][i]
				d.lockedFeed(in, now)
			}
			continue
		}
		p := d.peers[id]
		for i, in := range insts {
			if grant[k][i] > 0 {
				p.grant[in.ID] = grant[k][i]
			} else {
				delete(p.grant, in.ID)
			}
		}
	}
	// Grants on instances that are going go with them.
	for _, id := range ids[1:] {
		p := d.peers[id]
		for inst := range p.grant {
			if in := d.byID[inst]; in == nil || in.gone || in.draining {
				delete(p.grant, inst)
			}
		}
	}
}

// shareTargets splits slots among replicas by demand: one slot to each
// replica with any, the most demanding first, then the rest in
// proportion to demand by largest remainder (ties to the earlier
// replica). With no demand anywhere they are split evenly, so the first
// request at any replica finds a slot.
func shareTargets(demand []int, slots int) []int {
	t := make([]int, len(demand))
	if slots <= 0 || len(demand) == 0 {
		return t
	}
	w := slices.Clone(demand)
	if sum(w) == 0 {
		for i := range w {
			w[i] = 1
		}
	}
	order := make([]int, len(w))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return w[b] - w[a] })
	left := slots
	for _, i := range order {
		if left == 0 {
			return t
		}
		if w[i] > 0 {
			t[i]++
			left--
		}
	}
	total := sum(w)
	rem := make([]float64, len(w))
	given := 0
	for i, wi := range w {
		exact := float64(left) * float64(wi) / float64(total)
		n := int(exact)
		t[i] += n
		given += n
		rem[i] = exact - float64(n)
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case rem[a] > rem[b]:
			return -1
		case rem[a] < rem[b]:
			return 1
		}
		return a - b
	})
	for _, i := range order[:left-given] {
		t[i]++
	}
	return t
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
