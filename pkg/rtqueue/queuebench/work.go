package queuebench

import (
	"sync"
	"sync/atomic"
	"time"
)

// sink keeps the compiler from removing the spin loop.
var sink atomic.Uint64

// spinIters burns CPU for n iterations of a xorshift step. A fixed amount
// of work, not a wall-clock spin, so a thread that loses its CPU does not
// get its work done for free and throughput stays a CPU measure.
func spinIters(n int) {
	x := uint64(88172645463325252)
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink.Add(x & 1)
}

var (
	calibrateOnce sync.Once
	itersPerMs    int
)

// cpuWork runs about d of CPU work on an uncontended core. The rate is
// calibrated once per process, taking the fastest of several trials so a
// busy machine does not shrink the work.
func cpuWork(d time.Duration) {
	calibrateOnce.Do(calibrate)
	spinIters(int(d.Seconds() * 1000 * float64(itersPerMs)))
}

func calibrate() {
	const n = 2_000_000
	best := time.Duration(1 << 62)
	for range 7 {
		start := time.Now()
		spinIters(n)
		best = min(best, time.Since(start))
	}
	itersPerMs = max(1, int(float64(n)/best.Seconds()/1000))
}
