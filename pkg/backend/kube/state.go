package kube

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

// Errors the backend reports in Failed and Exited events.
var (
	// ErrStartTimeout fails a start that no ready endpoint answered in
	// time.
	ErrStartTimeout = errors.New("no new ready endpoint within the ready timeout")
	// ErrEndpointGone is an instance whose endpoint left its EndpointSlices
	// or stopped being ready without Gantry asking.
	ErrEndpointGone = errors.New("endpoint removed or not ready")
	// ErrClosed fails the starts still pending when the backend closes.
	ErrClosed = errors.New("kubernetes backend closed")
	// ErrFollower fails a start asked of a backend that follows: another
	// gateway replica owns the replica counts, and a second writer would
	// undo its decisions.
	ErrFollower = errors.New("this gateway replica follows: the leader scales")
)

// event is one report for the dispatcher. Events are produced under the
// backend's lock, in order, and delivered later outside it.
type event struct {
	kind     eventKind
	inst     backend.Instance // Ready, Exited
	function string           // Failed
	err      error            // Failed, Exited
}

type eventKind int

const (
	evReady eventKind = iota
	evFailed
	evExited
)

// fnState is the backend's accounting for one function. It is pure: no
// I/O, no clock; callers pass now. The invariant the dispatcher relies on
// is that every requested start ends in exactly one Ready or Failed event,
// so a start is a token in pending until a ready endpoint claims it or its
// deadline passes.
type fnState struct {
	decl stack.Function
	// pending holds when each unanswered start was asked for, oldest
	// first; a new ready endpoint answers the oldest.
	pending []time.Time
	// reported are instances announced Ready and not stopped, by pod.
	reported map[string]backend.Instance
	// stopping are instances Stop was called for whose endpoint is still
	// routable; Exited(nil) follows when it goes.
	stopping map[string]stopEntry
	// view is the function's routable endpoints right now: pod to
	// host:port, from every EndpointSlice of its Service.
	view map[string]string
	// retire lists pods the worker must remove (or mark cheapest to
	// remove) before it next writes the replica count.
	retire []retirement
	// follow is set while another gateway replica decides. Nothing here
	// asks for pods then, so every routable endpoint is an instance as
	// soon as it is seen, and one that goes was retired by the leader,
	// which is a clean exit rather than a loss.
	follow bool
}

// stopEntry is a stopped instance whose endpoint has not gone yet.
type stopEntry struct {
	inst  backend.Instance
	since time.Time
	// forced is set once the pod has been queued for deletion because
	// its endpoint outlived the stop grace.
	forced bool
}

// retirement asks the worker to take one pod out. force deletes the pod
// even where a deletion cost would normally suffice: the workload's
// controller removed some other pod instead.
type retirement struct {
	pod   string
	force bool
}

func newFnState(f stack.Function) *fnState {
	return &fnState{decl: f, reported: map[string]backend.Instance{},
		stopping: map[string]stopEntry{}, view: map[string]string{}}
}

// target is the replica count the cluster should hold: every instance
// the dispatcher counts as live, ready or starting. Stopped instances and
// spare endpoints nobody asked for are not counted, so the workload's
// controller removes them. It never goes below the declared minimum,
// which the dispatcher keeps live anyway: the replacement of a pod that
// crashed is then already on its way, a spare for the dispatcher's restart.
func (s *fnState) target() int32 { return int32(max(s.live(), s.decl.MinScale)) }

// live counts the instances the dispatcher counts: reported and pending.
func (s *fnState) live() int { return len(s.reported) + len(s.pending) }

// start records n requested starts and answers as many as spare ready
// endpoints allow at once. A follower fails them at once: a start it
// booked would count towards a replica count it never writes, and no
// endpoint is left to answer it, since it adopts them all.
func (s *fnState) start(n int, now time.Time) []event {
	if s.follow {
		evs := make([]event, 0, n)
		for range n {
			evs = append(evs, event{kind: evFailed, function: s.decl.Name,
				err: fmt.Errorf("function %s: %w", s.decl.Name, ErrFollower)})
		}
		return evs
	}
	for range n {
		s.pending = append(s.pending, now)
	}
	return s.claim(now)
}

// observe replaces the routable view. Reported instances whose endpoint
// went are Exited with an error (cleanly in follow mode); stopped ones
// whose endpoint went are Exited cleanly; then new endpoints answer
// pending starts, or in follow mode are all adopted.
func (s *fnState) observe(view map[string]string, now time.Time) []event {
	s.view = view
	var evs []event
	for _, pod := range sortedKeys(s.reported) {
		inst := s.reported[pod]
		if addr, ok := view[pod]; !ok || addr != inst.Addr {
			delete(s.reported, pod)
			var err error
			if !s.follow {
				err = fmt.Errorf("instance %s at %s: %w", pod, inst.Addr, ErrEndpointGone)
			}
			evs = append(evs, event{kind: evExited, inst: inst, err: err})
		}
	}
	for _, pod := range sortedKeys(s.stopping) {
		if addr, ok := view[pod]; !ok || addr != s.stopping[pod].inst.Addr {
			evs = append(evs, event{kind: evExited, inst: s.stopping[pod].inst})
			delete(s.stopping, pod)
		}
	}
	return append(evs, s.claim(now)...)
}

// claim pairs pending starts, oldest first, with spare endpoints: ready
// ones that are neither reported nor stopping. Spares come in name order
// so the outcome does not depend on map order. A follower claims every
// spare with no start behind it, hence no cold start to measure.
func (s *fnState) claim(now time.Time) []event {
	var evs []event
	for _, pod := range sortedKeys(s.view) {
		if len(s.pending) == 0 && !s.follow {
			break
		}
		if _, taken := s.reported[pod]; taken {
			continue
		}
		if _, taken := s.stopping[pod]; taken {
			continue
		}
		inst := backend.Instance{ID: pod, Function: s.decl.Name, Addr: s.view[pod]}
		if !s.follow {
			inst.ColdStart = now.Sub(s.pending[0])
			s.pending = s.pending[1:]
		}
		s.reported[pod] = inst
		evs = append(evs, event{kind: evReady, inst: inst})
	}
	return evs
}

// lead ends follow mode. The instances adopted so far stay reported, so
// they count towards the replica count the new leader writes; endpoints
// seen from now on are spares that only answer starts.
func (s *fnState) lead() { s.follow = false }

// expire fails the pending starts asked for at or before deadline.
func (s *fnState) expire(deadline time.Time, timeout time.Duration) []event {
	var evs []event
	for len(s.pending) > 0 && !s.pending[0].After(deadline) {
		s.pending = s.pending[1:]
		evs = append(evs, event{kind: evFailed, function: s.decl.Name,
			err: fmt.Errorf("function %s: %w (%v)", s.decl.Name, ErrStartTimeout, timeout)})
	}
	return evs
}

// failPending fails every pending start with err, for an error retrying
// cannot fix (the workload object is gone, access is denied).
func (s *fnState) failPending(err error) []event {
	evs := make([]event, 0, len(s.pending))
	for range s.pending {
		evs = append(evs, event{kind: evFailed, function: s.decl.Name, err: err})
	}
	s.pending = nil
	return evs
}

// stop moves a reported instance to stopping and queues its pod for
// retirement. It reports false for an instance it does not know (already
// exited, or never reported), which needs nothing further. A follower
// ignores it: only the leader retires pods, and the instance staying
// reported is what keeps the accounting whole, since its Exited then
// comes, like any other's, when the leader's retirement removes its
// endpoint.
func (s *fnState) stop(inst backend.Instance, now time.Time) bool {
	if s.follow {
		return false
	}
	known, ok := s.reported[inst.ID]
	if !ok {
		return false
	}
	delete(s.reported, inst.ID)
	s.stopping[inst.ID] = stopEntry{inst: known, since: now}
	s.retire = append(s.retire, retirement{pod: inst.ID})
	return true
}

// overdue queues a forced delete, once, for each stopped pod whose
// endpoint outlived grace, and reports whether it queued any.
func (s *fnState) overdue(now time.Time, grace time.Duration) bool {
	queued := false
	for _, pod := range sortedKeys(s.stopping) {
		e := s.stopping[pod]
		if !e.forced && now.Sub(e.since) >= grace {
			s.retire = append(s.retire, retirement{pod: pod, force: true})
			e.forced = true
			s.stopping[pod] = e
			queued = true
		}
	}
	return queued
}

// requeue puts retirements the worker could not carry out back in front,
// so they run before any queued since.
func (s *fnState) requeue(r []retirement) { s.retire = append(r, s.retire...) }

// takeRetire hands the queued retirements to the worker.
func (s *fnState) takeRetire() []retirement {
	r := s.retire
	s.retire = nil
	return r
}

// forget ends everything: pending starts fail with err, reported and
// stopping instances exit cleanly (the function is going away on
// purpose).
func (s *fnState) forget(err error) []event {
	evs := s.failPending(err)
	for _, pod := range sortedKeys(s.reported) {
		evs = append(evs, event{kind: evExited, inst: s.reported[pod]})
	}
	for _, pod := range sortedKeys(s.stopping) {
		evs = append(evs, event{kind: evExited, inst: s.stopping[pod].inst})
	}
	s.reported, s.stopping, s.retire = map[string]backend.Instance{}, map[string]stopEntry{}, nil
	return evs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
