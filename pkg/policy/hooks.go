package policy

import "time"

// The optional hooks a driver calls through the contract when a policy's
// capabilities name them (Caps.ColdStart, Caps.LookAhead; contract.go).
// The core policies have both; knative and the oracle have neither, since
// neither plans with a cold start or scales a chain ahead of its requests.

// MaxColdStart bounds a measured cold start (SetColdStart). A start that
// takes longer is a stuck start, not a cold start: the Kubernetes backend
// fails a start after 5 minutes (its default ReadyTimeout). Planning with
// a larger value would let every request wait that long behind busy
// containers before the Reactive and Look-Ahead Scalers start one, since
// a new container "could not serve it sooner"; one bad measurement would
// stall scaling up. The bound also keeps the deadline arithmetic (cold
// start plus execution time) far from overflowing. The declared cold
// start, Spec.ColdStart, is the driver's to bound (the simulator allows
// an hour) and is planned with as it is.
const MaxColdStart = 5 * time.Minute

// SetColdStart replaces the cold start the policy plans new containers
// with (Spec.ColdStart until then) by a measured one: the Reactive
// Scaler's packing, where a new container can take work only after it,
// and the Look-Ahead Scaler's horizon, within which a request upstream is
// better served by a container already live. A negative d is ignored (no
// start takes negative time, so it can only be a bad measurement); a d
// above MaxColdStart plans with MaxColdStart. The proactive sizing does
// not use the cold start.
func (c *core) SetColdStart(d time.Duration) {
	if d < 0 {
		return
	}
	c.coldStart = min(d, MaxColdStart)
}

// hasLookAhead reports whether the policy runs the Look-Ahead Scaler.
func (c *core) hasLookAhead() bool { return c.p.lookAhead && c.p.react == reactOverload }

// LookAhead runs the Look-Ahead Scaler alone, for a driver that calls it
// when a request arrives at the head of the chain, so the downstream
// functions start containers while the request is still upstream instead
// of at the next Plan. out (one Decision per view) gets, for every
// downstream function, the containers to start now; out[0] and every
// Retire are 0. It does not close windows, run the proactive or reactive
// rules, or refresh the profiled models (it uses those of the latest
// Plan). For a policy without the Look-Ahead Scaler out is all zeros.
//
// LookAhead and Plan share the packing (lookAhead), and neither starts
// again what an earlier call at the same instant started (sameInstant):
// a Plan after LookAhead at one instant starts what Plan alone would,
// less what the LookAhead started.
func (c *core) LookAhead(now time.Time, views []View, out []Decision) {
	clear(out)
	if !c.hasLookAhead() {
		return
	}
	c.instant.begin(now, views)
	for f := 1; f < len(c.fns); f++ {
		out[f].Add = max(0, c.lookAhead(f, views)-c.instant.credit(f, &views[f]))
	}
	c.instant.record(out[:len(c.fns)])
}

// sameInstant is what the calls of one instant (LookAhead, Plan) decided.
// A driver applies each call's decisions at once, but may build the next
// call's views at the same instant before they show (the live dispatcher's
// views do show them, as starting instances). A later call at that
// instant credits the containers started that its view does not show, so
// its packing, which counts the same requests again, does not start their
// containers twice. At a later instant the views are the truth.
type sameInstant struct {
	at time.Time
	ok bool
	// expect is each function's live containers once the driver has
	// applied this instant's decisions; added is the containers they
	// started.
	expect, added []int
}

// begin starts a new instant unless now is the current one.
func (s *sameInstant) begin(now time.Time, views []View) {
	if s.ok && s.at.Equal(now) {
		return
	}
	s.at, s.ok = now, true
	for f := range s.expect {
		s.expect[f] = views[f].Live
	}
	clear(s.added)
}

// credit is how many of the containers this instant's earlier calls
// started for a function its view v does not show.
func (s *sameInstant) credit(f int, v *View) int {
	if s.added[f] == 0 {
		return 0
	}
	return min(s.added[f], max(0, s.expect[f]-v.Live))
}

// record adds a call's decisions to the instant.
func (s *sameInstant) record(out []Decision) {
	for f, d := range out {
		s.expect[f] += d.Add - d.Retire
		s.added[f] += d.Add
	}
}
