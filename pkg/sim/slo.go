package sim

import (
	"time"

	"gantry.dev/gantry/pkg/workload"
)

// FunctionSLOs is the split of app's SLO over its chain that a simulation
// of app applies, one budget per function in chain order. A live run that
// is compared with a simulation declares exactly these budgets, so both
// drivers give the policy the same per-function SLOs.
func FunctionSLOs(app workload.App) []time.Duration {
	share, _ := functionSLOs(app)
	return share
}
