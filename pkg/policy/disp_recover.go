package policy

// A rate error that recovers after a level shift (gantry-disp-recover
// only; tried, not kept in gantry: docs/simulator.md, "Room before the
// load is measured, and what blocks the bursty target").
//
// The slow dispersion the SLO sizing reads as the rate prediction's error
// (predictionSD) is an EWMA over about 40 windows of each window's
// squared count error over its prediction. One step's window dominates
// it: on the 250/s Twitter trace (image-compression, heavy sizes, seed 1)
// the window of the step at t = 230 s had a squared error of about 940
// over its prediction and took the estimate from 5 to 52, and it still
// read 32 at t = 600 s, long after the new level was learned. The
// variant clips each window's sample at dispRecoverClip times the
// estimate it enters (at least 1, a Poisson count's): a step still lifts
// the estimate, by at most dispRecoverClip·slowDispersionAlpha of itself
// a window, and the estimate falls back at the EWMA's pace once the
// windows are calm again, instead of carrying the step for 40 windows.
const dispRecoverClip = 10.0

// recoverSample is the window's squared count error d as the slow
// dispersion takes it under parts.dispRecover: clipped at dispRecoverClip
// times the current estimate.
func (c *core) recoverSample(d float64) float64 {
	if !c.p.dispRecover {
		return d
	}
	return min(d, dispRecoverClip*max(c.dispSlow, 1))
}
