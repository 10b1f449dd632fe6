package scaleout

import (
	"fmt"
	"maps"
	"slices"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// follower is the part of a replica that routes only: it asks for no
// instance, plans nothing, uses the slots the leader grants and keeps its
// samples for the leader until they are acknowledged.
type follower struct {
	dispatch.Solo
	seq     uint64
	acc     map[string]*samples
	unacked []batch
	// slots is the latest grant, kept for instances the backend has not
	// reported yet.
	slots map[string]int
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

func newFollower() *follower { return &follower{acc: map[string]*samples{}} }

func (*follower) role() Role { return Follower }

// Decides is false: the leader scales, from this replica's reports.
func (*follower) Decides() bool { return false }

// Slots is what the latest grant gives this replica on a new instance.
func (f *follower) Slots(id string, concurrency int) int { return min(f.slots[id], concurrency) }

// Arrived keeps an accepted request's size for the leader.
func (f *follower) Arrived(fn string, size float64) {
	s := f.samples(fn)
	if len(s.arrivals) < maxPeerSamples {
		s.arrivals = append(s.arrivals, size)
	} else {
		s.lost++
	}
}

// Executed keeps a finished execution for the leader.
func (f *follower) Executed(fn string, e dispatch.Sample) {
	s := f.samples(fn)
	if len(s.executions) < maxPeerSamples {
		s.executions = append(s.executions, Execution(e))
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

// checkGrant refuses a grant before anything of it is applied.
func checkGrant(g Grant) error {
	if len(g.Slots) > maxGrantInstances {
		return fmt.Errorf("%w: grant names %d instances, more than %d", stack.ErrInvalid, len(g.Slots), maxGrantInstances)
	}
	for id, n := range g.Slots {
		if n < 0 {
			return fmt.Errorf("%w: grant of %d slots on instance %q must not be negative", stack.ErrInvalid, n, id)
		}
	}
	return nil
}

// sync applies a grant to every instance and reports.
func (f *follower) sync(l dispatch.Locked, g Grant) Report {
	f.slots = maps.Clone(g.Slots)
	fns := l.Functions()
	for name := range fns {
		for _, in := range l.Instances(name) {
			l.SetSlots(in.ID, g.Slots[in.ID])
		}
	}
	f.cut(g.Ack)
	r := Report{Seq: f.seq, Functions: make(map[string]*FunctionReport, len(fns)), Granted: maps.Clone(f.slots)}
	for name := range fns {
		fr := functionReport(l, name)
		for _, b := range f.unacked {
			if s := b.fns[name]; s != nil {
				fr.Arrivals = append(fr.Arrivals, s.arrivals...)
				fr.Lost += s.lost
				fr.Executions = append(fr.Executions, s.executions...)
			}
		}
		r.Functions[name] = fr
	}
	return r
}

// cut forgets the batches the leader acknowledged and cuts a new one from
// the samples since the last sync.
func (f *follower) cut(ack uint64) {
	f.unacked = slices.DeleteFunc(f.unacked, func(b batch) bool { return b.seq <= ack })
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
}

// functionReport is fn's requests at this replica and the slots it holds.
func functionReport(l dispatch.Locked, fn string) *FunctionReport {
	fr := &FunctionReport{Held: map[string]int{}}
	queued, running := l.Requests(fn)
	for _, it := range queued {
		fr.Queue = append(fr.Queue, PeerItem(it))
	}
	for _, it := range running {
		fr.Running = append(fr.Running, PeerItem(it))
	}
	for _, in := range l.Instances(fn) {
		if h := max(in.Slots, in.Running); h > 0 {
			fr.Held[in.ID] = h
		}
	}
	return fr
}
