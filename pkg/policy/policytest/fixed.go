package policytest

import (
	"time"

	"gantry.dev/gantry/pkg/policy"
)

// Fixed keeps exactly n containers per function and runs queues FIFO. It is
// not a contender: it turns a driver into an M/G/c queue, which is how the
// simulator is checked against queueing theory.
func Fixed(n int) policy.Policy { return fixed{n: max(0, n)} }

type fixed struct{ n int }

func (fixed) Name() string                                        { return "fixed" }
func (fixed) Order() policy.Order                                 { return policy.FIFO }
func (fixed) Caps() policy.Caps                                   { return policy.Caps{} }
func (fixed) Estimate(int, float64) time.Duration                 { return 0 }
func (fixed) Arrive(time.Time, int, float64, policy.Counts) int   { return 0 }
func (fixed) Complete(int, float64, time.Duration, float64) error { return nil }

func (p fixed) Plan(_ time.Time, views []policy.View, out []policy.Decision) {
	for i, v := range views {
		out[i] = policy.Decision{Add: max(0, p.n-v.Live), Retire: max(0, min(v.Idle, v.Live-p.n))}
	}
}
