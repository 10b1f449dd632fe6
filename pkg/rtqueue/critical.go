package rtqueue

import "fmt"

// CriticalBand says which priorities are critical, and so what a pool gives
// them. Criticality is relative: the paper's RQ1 gives its ten services the
// criticalities 1..10 and the interfering objects less, and with a fixed
// cut at 50 none of them would reach a reserve worker or real-time
// priority. A band moves the cut and spreads the critical range over the
// thread priorities:
//
//   - priorities From..99 are critical: they run SCHED_FIFO and may take
//     the reserve workers;
//   - From..To spread evenly over the busy real-time range MinRT..MaxRT
//     (rounding down), and priorities above To share MaxRT;
//   - priorities below From are background: SCHED_OTHER, nice 10 at 0
//     falling to 0 just below From.
//
// Queue order does not depend on the band: a higher priority is always
// handed out first.
type CriticalBand struct {
	From, To     int
	MinRT, MaxRT int
}

// Defaults of the band and its mapping: the reference's real-time band,
// with idle workers above every busy one.
const (
	defaultIdleRT  = 94
	defaultMaxNice = 10
)

// DefaultCriticalBand is the engine's historical cut: 50..99 critical,
// over SCHED_FIFO 50..93.
func DefaultCriticalBand() CriticalBand {
	return CriticalBand{From: 50, To: MaxPriority, MinRT: 50, MaxRT: 93}
}

// PaperCriticalBand fits the paper's RQ1 setup: the services' criticalities
// 1..10 are critical and spread over SCHED_FIFO 50..93 (one level every
// four or five), and the interfering objects (criticality 0) are
// background.
func PaperCriticalBand() CriticalBand {
	return CriticalBand{From: 1, To: 10, MinRT: 50, MaxRT: 93}
}

// Mapping is the band's LinearMapping. Idle workers sit at 94, or one
// above MaxRT if that is higher, so a woken worker always preempts a busy
// one.
func (b CriticalBand) Mapping() LinearMapping {
	return LinearMapping{IdleRT: max(defaultIdleRT, b.MaxRT+1), MinRT: b.MinRT, MaxRT: b.MaxRT,
		RTFloor: b.From, RTCeiling: b.To, MaxNice: defaultMaxNice}
}

// Apply makes the band the pool's meaning of critical: its thread mapping
// and its reserve floor.
func (b CriticalBand) Apply(cfg PoolConfig) PoolConfig {
	cfg.Mapping = b.Mapping()
	cfg.ReserveFloor = b.From
	return cfg
}

// Validate reports, with ErrInvalidConfig, a band no pool can use.
func (b CriticalBand) Validate() error {
	switch {
	case b.From < 1 || b.From > MaxPriority:
		// 0 would make every item real time, background work included:
		// the starvation the mapping exists to prevent.
		return fmt.Errorf("%w: critical band starts at %d, must be in 1..99", ErrInvalidConfig, b.From)
	case b.To < b.From || b.To > MaxPriority:
		return fmt.Errorf("%w: critical band ends at %d, must be in %d..99", ErrInvalidConfig, b.To, b.From)
	case b.MaxRT > 98:
		return fmt.Errorf("%w: busy real-time priority %d leaves no room above it for idle workers (at most 98)", ErrInvalidConfig, b.MaxRT)
	}
	return b.Mapping().validate()
}
