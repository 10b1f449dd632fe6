package policy

import "time"

// Retirement by idle age (docs/simulator.md, "Retirement by idle age").
// Keeping an idle container costs one container-second a second (rent);
// retiring it and starting another when load returns costs the start's
// own container-seconds, the cold start, plus the requests that wait on
// that start, which we weigh as a second cold start (buy). The
// deterministic rent-or-buy rule keeps renting until the rent paid
// equals the price: an instance idle longer than
//
//	τ = max(minIdleAge, 2 · cold start)
//
// is retired, at every tick, as long as the function keeps its target
// (the SLO sizing plus a burst's excess). The rule is 2-competitive
// against a clairvoyant retirer on any idle gap. The floor keeps a
// millisecond local cold start from turning every lull into a stop and a
// start: with it, a container slot is spawned at most once per
// minIdleAge plus a cold start, which bounds the spawns per minute.
const (
	// minIdleAge is the floor of the idle age at which a container is
	// retired.
	minIdleAge = 5 * time.Second
	// idleBuyFactor is the price of a start in cold starts: its own and
	// the wait it imposes.
	idleBuyFactor = 2
)

// IdleAgeLimit is the idle age past which a container above its target
// is retired, for a function whose instances start in coldStart.
func IdleAgeLimit(coldStart time.Duration) time.Duration {
	return max(minIdleAge, idleBuyFactor*coldStart)
}

// retireByAge is how many of function f's idle instances to retire now:
// those idle longer than IdleAgeLimit, but never below target and never
// while requests wait.
func (c *core) retireByAge(v *View, target int) int {
	if v.Queued > 0 || v.Live <= target {
		return 0
	}
	limit := IdleAgeLimit(c.coldStart)
	old := 0
	for _, age := range v.IdleAges {
		if age >= limit {
			old++
		}
	}
	return min(old, v.Idle, v.Live-target)
}
