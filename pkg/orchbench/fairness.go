package orchbench

import (
	"fmt"
	"math"
)

// maxChurnGap is how far apart two arms' interference may be and still be
// called the same: 5% of objects per second, and 5% of the objects a paced
// case's grid asked for. Within it, one burst cut by the iteration's end
// (one of 30 in a continuous case, 3.3%) does not count as unequal.
const maxChurnGap = 0.05

// churnWarnings says, one line each, where the arms did not meet the same
// interference: a paced case whose grid an arm did not keep (its API
// server took the objects slower than the case asks), arms whose rates
// differ by more than maxChurnGap, or an unpaced continuous case, where
// each arm meets what its own API server absorbs. A reduction of such a
// case compares unequal arms; the run says so instead of comparing them
// silently.
func churnWarnings(churn []Churn) []string {
	var out []string
	byCase := map[Case][]Churn{}
	var order []Case
	for _, ch := range churn {
		c := Case{ch.Mode, ch.Burst}
		if byCase[c] == nil {
			order = append(order, c)
		}
		byCase[c] = append(byCase[c], ch)
		if ch.DueObjects > 0 && ch.Shortfall > maxChurnGap {
			out = append(out, fmt.Sprintf("%s %s/%d: created %d of the %d objects its schedule (%.1f objects/s) asked for, %.0f%% short; %d of %d bursts late, up to %.1f s: its API server did not keep the case's rate",
				ch.Controller, ch.Mode, ch.Burst, ch.Objects, ch.DueObjects, ch.TargetPerSecond, 100*ch.Shortfall,
				ch.LateBursts, ch.Bursts, ch.MaxLagMs/1000))
		}
	}
	for _, c := range order {
		arms := byCase[c]
		if len(arms) < 2 {
			continue
		}
		lo, hi := math.Inf(1), 0.0
		for _, ch := range arms {
			lo, hi = min(lo, ch.PerSecond), max(hi, ch.PerSecond)
		}
		unpaced := arms[0].TargetPerSecond == 0
		if hi > 0 && (hi-lo)/hi > maxChurnGap || unpaced {
			line := fmt.Sprintf("%s/%d: the arms met unequal interference:", c.Mode, c.Burst)
			for _, ch := range arms {
				line += fmt.Sprintf(" %s %d objects, %.1f/s;", ch.Controller, ch.Objects, ch.PerSecond)
			}
			if unpaced {
				line += " the case is not paced (back to back), so each arm meets what its own API server absorbs"
			} else {
				line += fmt.Sprintf(" more than %.0f%% apart", 100*maxChurnGap)
			}
			out = append(out, line+"; its reductions do not compare like with like")
		}
	}
	return out
}
