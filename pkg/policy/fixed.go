package policy

import "time"

// Fixed keeps exactly n containers per function and runs queues FIFO. It is
// not a contender: it turns the simulator into an M/G/c queue, which is how
// the engine is validated against queueing theory.
func Fixed(n int) Policy { return fixed{n: max(0, n)} }

type fixed struct{ n int }

func (fixed) Name() string                                        { return "fixed" }
func (fixed) Order() Order                                        { return FIFO }
func (fixed) Detailed() bool                                      { return false }
func (fixed) Dedicated() bool                                     { return false }
func (fixed) Estimate(int, float64) time.Duration                 { return 0 }
func (fixed) Arrive(time.Time, int, float64, Counts) int          { return 0 }
func (fixed) Complete(int, float64, time.Duration, float64) error { return nil }

func (p fixed) Plan(_ time.Time, views []View, out []Decision) {
	for i, v := range views {
		out[i] = Decision{Add: max(0, p.n-v.Live), Retire: max(0, min(v.Idle, v.Live-p.n))}
	}
}
