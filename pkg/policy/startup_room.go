package policy

// Room at start-up (gantry-startup-room only; tried, not kept in gantry:
// docs/simulator.md, "Room before the load is measured").
//
// The SLO sizing's margin for the rate's error reads the window counts'
// dispersion (predictionSD), and the dispersion is counted only from the
// third window of load on (observeDispersion): until then the sizing
// assumes the load is as steady as Poisson arrivals, because it has not
// seen anything else. A step in those first windows therefore meets the
// smallest margin the run will ever hold. On the Twitter trace at 288
// cores, seed 1, the largest burst of the run (120/s to 270/s within 3 s)
// starts 18 s in, and gantry misses 87 requests in its first two seconds
// on image-compression with heavy sizes, as many as the run's whole 0.1%
// allowance. The variant adds startupRoomShare of the predicted rate to
// the rate the sizing is asked for while the load has not yet had
// warmupWindows windows closed: the room a step of that share would need,
// held only while nothing says the load is steady or bursty.
const startupRoomShare = 0.4

// startupRoom is the rate the sizing adds before the load's dispersion is
// measured: startupRoomShare of the predicted rate under
// parts.startupRoom, 0 otherwise and once warmupWindows windows of load
// have closed.
func (c *core) startupRoom() float64 {
	if !c.p.startupRoom || c.loadWindows > warmupWindows {
		return 0
	}
	return startupRoomShare * c.rate
}
