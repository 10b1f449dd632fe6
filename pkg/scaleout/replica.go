package scaleout

import (
	"errors"
	"fmt"

	"gantry.dev/gantry/pkg/dispatch"
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
//
// The layer wraps a single gateway's dispatcher as its dispatch.Peers: a
// Replica is a follower (follower.go) until it leads (leader.go), and it
// hands every call of the dispatcher to the part it plays. Its state is
// guarded by the dispatcher's lock: the dispatcher calls it with the lock
// held, and its own entry points take the lock with WithLock.

// Role is a replica's part in a scaled-out gateway.
type Role int

const (
	// Follower routes only. Its instances are the ones the backend reports
	// (it asks for none), it uses the slots the leader grants, and it
	// hands its samples and queue to the leader at every Sync.
	Follower Role = iota
	// Leader decides for every replica from their Reports, starts and
	// stops instances, and grants slots. A follower becomes one with Lead.
	Leader
)

func (r Role) String() string {
	switch r {
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
	ErrScaledOut = fmt.Errorf("%w: this gateway is one of several replicas: functions come from the stack file and the leader scales", dispatch.ErrRefused)
	// ErrNotFollower answers a Sync sent to a replica that leads, or that
	// is shutting down.
	ErrNotFollower = errors.New("this gateway replica does not follow")
)

// part is one role's side of dispatch.Peers.
type part interface {
	dispatch.Peers
	role() Role
}

// Replica is the scale-out layer over one replica's dispatcher. Give it
// to the dispatcher as its Config.Peers, and mount Routes on the gateway.
type Replica struct {
	d *dispatch.Dispatcher
	// part is the role played now; the dispatcher's lock guards it and
	// all its state.
	part part
}

// NewReplica returns a replica that follows until it leads.
func NewReplica() *Replica { return &Replica{part: newFollower()} }

// Attach takes the dispatcher this layer wraps (dispatch.New calls it).
func (r *Replica) Attach(d *dispatch.Dispatcher) { r.d = d }

// The dispatcher's calls, each to the part played now. No replica takes
// API writes, whatever its part: every one loads the same stack file.

func (r *Replica) Writes() error                        { return ErrScaledOut }
func (r *Replica) Decides() bool                        { return r.part.Decides() }
func (r *Replica) Slots(id string, concurrency int) int { return r.part.Slots(id, concurrency) }
func (r *Replica) Queued(fn string) int                 { return r.part.Queued(fn) }
func (r *Replica) Running(id string) int                { return r.part.Running(id) }
func (r *Replica) Holds(fn, id string) bool             { return r.part.Holds(fn, id) }
func (r *Replica) Requests(fn string, running bool, add func(bool, dispatch.Item)) {
	r.part.Requests(fn, running, add)
}
func (r *Replica) Arrived(fn string, size float64)       { r.part.Arrived(fn, size) }
func (r *Replica) Executed(fn string, s dispatch.Sample) { r.part.Executed(fn, s) }
func (r *Replica) Changed(l dispatch.Locked, fn string)  { r.part.Changed(l, fn) }
func (r *Replica) Planned(l dispatch.Locked)             { r.part.Planned(l) }

// Role is the part this replica plays now.
func (r *Replica) Role() Role {
	var role Role
	r.d.WithLock(func(dispatch.Locked) { role = r.part.role() })
	return role
}

// Lead makes a follower the leader: from now on it decides for every
// replica. The instances it follows stay, with the slots it was granted,
// until the first reports let it share them anew.
func (r *Replica) Lead() error {
	var err error
	r.d.WithLock(func(l dispatch.Locked) {
		if _, ok := r.part.(*follower); !ok {
			err = fmt.Errorf("only a follower can lead; this replica is the %v", r.part.role())
			return
		}
		r.part = newLeader(l.Now())
	})
	return err
}

// Sync is a follower's side of one exchange with the leader: it applies
// the grant to its instances and reports.
func (r *Replica) Sync(g Grant) (Report, error) {
	if err := checkGrant(g); err != nil {
		return Report{}, err
	}
	rep, err := Report{}, ErrNotFollower
	r.d.WithLock(func(l dispatch.Locked) {
		if f, ok := r.part.(*follower); ok && !l.Closed() {
			rep, err = f.sync(l, g), nil
		}
	})
	return rep, err
}

// withLeader runs f under the dispatcher's lock if this replica leads.
func (r *Replica) withLeader(f func(*leader, dispatch.Locked)) {
	r.d.WithLock(func(l dispatch.Locked) {
		if ld, ok := r.part.(*leader); ok {
			f(ld, l)
		}
	})
}

// SetPeers names the other replicas the leader decides for. A replica no
// longer named is gone: what it held is free again. A follower ignores it.
func (r *Replica) SetPeers(ids []string) error {
	if len(ids) > maxPeers {
		return fmt.Errorf("%d peers, more than %d", len(ids), maxPeers)
	}
	r.withLeader(func(ld *leader, l dispatch.Locked) { ld.setPeers(l, ids) })
	return nil
}

// GrantFor is what the leader sends peer id at its next sync; false when
// this replica does not lead or does not know the peer.
func (r *Replica) GrantFor(id string) (g Grant, ok bool) {
	r.withLeader(func(ld *leader, _ dispatch.Locked) { g, ok = ld.grantFor(id) })
	return g, ok
}

// Fold takes peer id's report: its new samples go to the policy (each
// arrival as if it had arrived here), its queue and running requests into
// the next plans, its holdings into the next shares. Syncs with one peer
// must not overlap.
func (r *Replica) Fold(id string, rep Report) (err error) {
	r.withLeader(func(ld *leader, l dispatch.Locked) { err = ld.fold(l, id, rep) })
	return err
}
