package rtqueue

import "fmt"

// Policy is a Linux scheduling policy a worker thread can run under.
type Policy int

const (
	// PolicyOther is SCHED_OTHER (the default time-sharing policy) with a
	// nice value.
	PolicyOther Policy = iota
	// PolicyFIFO is SCHED_FIFO with a real-time priority 1..99: the thread
	// runs until it blocks or a higher real-time thread becomes runnable.
	PolicyFIFO
)

func (p Policy) String() string {
	if p == PolicyFIFO {
		return "SCHED_FIFO"
	}
	return "SCHED_OTHER"
}

// SchedParams is what a worker thread is set to. RTPriority is used under
// PolicyFIFO (1..99, higher runs first, like item priorities); Nice under
// PolicyOther (-20..19, lower runs first, as the kernel defines it).
type SchedParams struct {
	Policy     Policy
	RTPriority int
	Nice       int
}

func (s SchedParams) String() string {
	if s.Policy == PolicyFIFO {
		return fmt.Sprintf("SCHED_FIFO/%d", s.RTPriority)
	}
	return fmt.Sprintf("SCHED_OTHER/nice=%d", s.Nice)
}

// Scheduler applies scheduling parameters to one OS thread. It is an
// interface so tests can inject a kernel that refuses real-time policies.
type Scheduler interface {
	// Set applies p to the thread tid (0 means the calling thread).
	Set(tid int, p SchedParams) error
	// Tid returns the calling thread's id.
	Tid() int
}

// Mapping turns item priorities into thread scheduling parameters.
type Mapping interface {
	// Idle is what a worker waiting for an item runs at. It must be at
	// least as high as any Busy value so a waking idle worker preempts the
	// busy ones.
	Idle() SchedParams
	// Busy is what a worker runs at while processing an item of priority.
	Busy(priority int) SchedParams
}

// LinearMapping is the default Mapping. Items at or above RTFloor run
// SCHED_FIFO at a real-time priority rising linearly from MinRT (at
// RTFloor) to MaxRT (at RTCeiling, and above it); idle workers sit at
// IdleRT above them all. Items below RTFloor run SCHED_OTHER, with nice
// falling linearly from MaxNice (at priority 0) to 0 (just below RTFloor).
//
// Keeping low-priority work out of SCHED_FIFO is deliberate: a real-time
// thread spinning on background work would starve every normal thread of
// the process (the informers, the API client, the Go runtime's own helpers)
// and the rest of the node, up to the kernel's RT throttling limit.
type LinearMapping struct {
	IdleRT, MinRT, MaxRT int
	RTFloor              int
	// RTCeiling is the priority that gets MaxRT; 0 means 99. A narrow band
	// (the paper's criticalities 1..10) then spreads over the whole
	// real-time range instead of a tenth of it.
	RTCeiling int
	MaxNice   int
}

// DefaultMapping keeps the reference's band: idle at 94, busy below it.
func DefaultMapping() LinearMapping {
	return DefaultCriticalBand().Mapping()
}

func (m LinearMapping) Idle() SchedParams {
	return SchedParams{Policy: PolicyFIFO, RTPriority: m.IdleRT}
}

func (m LinearMapping) Busy(priority int) SchedParams {
	p := clampPriority(priority)
	if p >= m.RTFloor {
		top := m.ceiling()
		return SchedParams{Policy: PolicyFIFO, RTPriority: m.MinRT + lerp(min(p, top)-m.RTFloor, top-m.RTFloor, m.MaxRT-m.MinRT)}
	}
	return SchedParams{Policy: PolicyOther, Nice: m.niceBelowFloor(p)}
}

func (m LinearMapping) ceiling() int {
	if m.RTCeiling == 0 {
		return MaxPriority
	}
	return m.RTCeiling
}

// niceBelowFloor falls from MaxNice at priority 0 to 0 just below RTFloor.
// With RTFloor 1, priority 0 is the only non-critical level, and it is
// background work: it gets MaxNice, not the 0 the empty span would give.
func (m LinearMapping) niceBelowFloor(p int) int {
	span := m.RTFloor - 1
	if span <= 0 {
		return m.MaxNice
	}
	return m.MaxNice - lerp(p, span, m.MaxNice)
}

// lerp scales x in [0, span] onto [0, out], rounding down.
func lerp(x, span, out int) int {
	if span <= 0 {
		return out
	}
	return x * out / span
}

// validate checks that the mapping stays in the kernel's ranges and that
// idle outranks busy, so a reserve worker always preempts the others.
func (m LinearMapping) validate() error {
	switch {
	case m.MinRT < 1 || m.MaxRT > 99 || m.MinRT > m.MaxRT:
		return fmt.Errorf("%w: real-time range %d..%d must lie in 1..99", ErrInvalidConfig, m.MinRT, m.MaxRT)
	case m.IdleRT < m.MaxRT || m.IdleRT > 99:
		return fmt.Errorf("%w: idle real-time priority %d must be in %d..99", ErrInvalidConfig, m.IdleRT, m.MaxRT)
	case m.RTFloor < 1 || m.RTFloor > MaxPriority:
		return fmt.Errorf("%w: RTFloor %d must be in 1..99", ErrInvalidConfig, m.RTFloor)
	case m.RTCeiling != 0 && (m.RTCeiling < m.RTFloor || m.RTCeiling > MaxPriority):
		return fmt.Errorf("%w: RTCeiling %d must be in RTFloor (%d)..99", ErrInvalidConfig, m.RTCeiling, m.RTFloor)
	case m.MaxNice < 0 || m.MaxNice > 19:
		return fmt.Errorf("%w: MaxNice %d must be in 0..19", ErrInvalidConfig, m.MaxNice)
	}
	return nil
}
