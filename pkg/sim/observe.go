package sim

// What the engine tells an observer (engine.observe): the conformance
// scripts of pkg/policy/policytest compare it with what the live
// dispatcher does.
type obsKind uint8

const (
	obsStart  obsKind = iota // a container was asked for
	obsReady                 // a container finished its cold start
	obsRun                   // a request started on a container
	obsStop                  // a container was retired
	obsRefuse                // a request was refused at a full queue
)

// note tells the observer, if any; the hot path pays one nil check.
func (e *engine) note(k obsKind, fn, ctr int32, req int64) {
	if e.observe != nil {
		e.observe(observation{kind: k, at: e.now, fn: fn, ctr: ctr, req: req})
	}
}

type observation struct {
	kind obsKind
	at   int64
	fn   int32
	ctr  int32
	req  int64
}
