package policy

import "time"

// The one set of defaults every driver runs a policy with: the simulator
// (pkg/sim), the live dispatcher (pkg/dispatch) and the stack file
// (pkg/stack) take them from here, so a figure measured in simulation and
// one measured live were taken under the same settings unless a caller set
// a value explicitly. The paper's experiment preset sets its own values
// (pkg/experiment) instead of leaning on these.
const (
	// DefaultTick is the planning period: how often a driver calls Plan.
	// The panic rule measures the arrival rate over at least this long.
	DefaultTick = 500 * time.Millisecond
	// DefaultWindow is the proactive scaler's period.
	DefaultWindow = 10 * time.Second
	// DefaultIdleTimeout stops an instance idle this long, whatever the
	// policy says (Fifer's simulator constant). Policies with idling
	// detection retire long before it; it is the backstop for those
	// without.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultMaxQueue is a function's queue bound: a request that finds
	// this many waiting is refused before the policy sees it (HTTP 429
	// live, Result.Rejected in simulation).
	DefaultMaxQueue = 1000
	// MaxQueueBound is the largest queue bound a function may declare.
	MaxQueueBound = 100_000
)
