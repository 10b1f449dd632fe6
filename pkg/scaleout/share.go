package scaleout

import (
	"maps"
	"slices"
	"strings"

	"gantry.dev/gantry/pkg/dispatch"
)

// self is the leader's own key among the shares' participants.
const self = ""

func (ld *leader) shareAll(l dispatch.Locked) {
	for name := range l.Functions() {
		ld.share(l, name)
	}
}

// shares is one function's slots among the replicas as share decides
// them: k indexes the replicas (the leader first), i the instances.
type shares struct {
	ids   []string
	insts []dispatch.InstanceState
	// grant[k][i] is what replica k may use on instance i; held[k][i]
	// what it may be using: its grant, or what it reported holding if
	// more (a lowered grant it has not applied yet, or requests still
	// running past it).
	grant, held [][]int
	demand      []int
	running     func(k, i int) int
}

// share decides how many slots of each of fn's instances each replica may
// use, and applies the leader's own share at once.
func (ld *leader) share(l dispatch.Locked, fn string) {
	decl, ok := l.Functions()[fn]
	if !ok {
		return
	}
	s, blocked := ld.sharesNow(l, fn)
	target := shareTargets(s.demand, decl.Concurrency*len(s.insts))
	s.lower(target)
	if !blocked {
		s.raise(target, decl.Concurrency)
	}
	ld.apply(l, s)
}

// sharesNow is fn's slots as granted and held now; blocked while a
// replica the new leader has not heard from may still hold some.
func (ld *leader) sharesNow(l dispatch.Locked, fn string) (s shares, blocked bool) {
	blocked = ld.unsettled(l)
	for _, in := range l.Instances(fn) {
		if !in.Draining && !in.Gone {
			s.insts = append(s.insts, in)
		}
	}
	slices.SortFunc(s.insts, func(a, b dispatch.InstanceState) int { return strings.Compare(a.ID, b.ID) })
	s.ids = append([]string{self}, slices.Sorted(maps.Keys(ld.peers))...)
	s.grant, s.held, s.demand = make([][]int, len(s.ids)), make([][]int, len(s.ids)), make([]int, len(s.ids))
	for k, id := range s.ids {
		s.grant[k], s.held[k] = make([]int, len(s.insts)), make([]int, len(s.insts))
		if id == self {
			s.demand[k] = l.QueueLen(fn)
			for i, in := range s.insts {
				s.grant[k][i] = in.Slots
				s.held[k][i] = max(in.Slots, in.Running)
				s.demand[k] += in.Running
			}
			continue
		}
		p := ld.peers[id]
		fr := p.fns[fn]
		for i, in := range s.insts {
			s.grant[k][i] = p.grant[in.ID]
			s.held[k][i] = p.holds(fr, in.ID)
		}
		if fr != nil {
			s.demand[k] = len(fr.Queue) + len(fr.Running)
		}
	}
	s.running = func(k, i int) int {
		if s.ids[k] == self {
			return s.insts[i].Running
		}
		n := 0
		if fr := ld.peers[s.ids[k]].fns[fn]; fr != nil {
			for _, it := range fr.Running {
				if it.Instance == s.insts[i].ID {
					n++
				}
			}
		}
		return n
	}
	return s, blocked
}

// lower cuts the grants above target: idle slots first, then busy ones,
// which free up as their requests finish.
func (s *shares) lower(target []int) {
	for k := range s.ids {
		excess := sum(s.grant[k]) - target[k]
		for pass := 0; pass < 2 && excess > 0; pass++ {
			for i := range s.insts {
				floor := 0
				if pass == 0 {
					floor = min(s.grant[k][i], s.running(k, i))
				}
				cut := min(excess, s.grant[k][i]-floor)
				if cut > 0 {
					s.grant[k][i] -= cut
					excess -= cut
				}
			}
		}
		if s.ids[k] == self {
			// The leader applies its grant at once, so it holds only that
			// and what it runs.
			for i := range s.insts {
				s.held[k][i] = max(s.grant[k][i], s.insts[i].Running)
			}
		}
	}
}

// raise lifts the grants below target from slots nobody holds.
func (s *shares) raise(target []int, concurrency int) {
	for k := range s.ids {
		short := target[k] - sum(s.grant[k])
		for i := range s.insts {
			if short <= 0 {
				break
			}
			free := concurrency
			for j := range s.ids {
				free -= s.held[j][i]
			}
			if take := min(short, free); take > 0 {
				s.grant[k][i] += take
				s.held[k][i] = max(s.held[k][i], s.grant[k][i])
				short -= take
			}
		}
	}
}

// apply sets the leader's own slots and records every follower's grant;
// grants on instances that are going go with them.
func (ld *leader) apply(l dispatch.Locked, s shares) {
	for k, id := range s.ids {
		if id == self {
			for i, in := range s.insts {
				l.SetSlots(in.ID, s.grant[k][i])
			}
			continue
		}
		p := ld.peers[id]
		for i, in := range s.insts {
			if s.grant[k][i] > 0 {
				p.grant[in.ID] = s.grant[k][i]
			} else {
				delete(p.grant, in.ID)
			}
		}
	}
	for _, id := range s.ids[1:] {
		p := ld.peers[id]
		for inst := range p.grant {
			if in, ok := l.Instance(inst); !ok || in.Gone || in.Draining {
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
