// Package bound computes, from a run's realised requests, how few
// containers any policy could have held: the work floor (the mean busy
// cores) and a clairvoyant lower bound on container-time at 100% SLO
// compliance, and it builds a clairvoyant schedule whose container count a
// policy can follow (the constructive oracle, an achievable upper bound).
//
// The model is the simulator's (docs/simulator.md, "The clairvoyant bound"):
// a container runs one request at a time, is live from the instant it is
// started, can run a request only after its cold start c (containers alive
// at time 0 are warm), and stays live without a break until it is retired.
// A job is one request's execution at one function: it runs for Exec
// without preemption, starting no earlier than Release and ending no later
// than Deadline. Everything is in nanoseconds from the start of the run.
//
// The package is pure: no clock, no I/O, deterministic.
package bound

import (
	"math"
	"time"
)

// Job is one request's execution at one function.
type Job struct {
	Release, Deadline, Exec int64
}

// Acc accumulates one function's jobs in any order and returns a lower
// bound on the container-time (container·ns) any schedule that meets
// every deadline needs. Memory is proportional to the run's length over
// the cell width, not to the number of jobs.
type Acc struct {
	cold    int64
	cell    int64 // grid step δ
	prewarm int
	work    float64
	// lens are window lengths; dens[i·len(lens)+k] accumulates (as a
	// difference array over i) the work of the jobs that lie wholly
	// inside the window [i·δ, i·δ + lens[k]]. The windows of one cell are
	// side by side: a job ends every window's span at the same cell, so
	// Add writes those in one cache line instead of one per window.
	lens []int64
	// wins are each window length's quotient and remainder by the cell,
	// so Add finds a job's cells with one division.
	wins []window
	dens []float64
	// cells is the length of each window's difference array.
	cells int
	// phi is the index in lens of the window of length c - δ that the
	// forward-maximum bound uses, or -1 when the grid is too coarse.
	phi int
	// blocks[o][b] is the most work jobs can do inside block b of
	// partition o (blocks of blockLen, shifted by o·blockLen/offsets).
	blockLen int64
	blocks   [offsets][]float64
	// comp is a difference array of the jobs whose compulsory part (the
	// time [Deadline-Exec, Release+Exec] a job runs in every schedule, when
	// it has less slack than execution) covers each whole cell.
	comp []int32
	n    int64
}

// offsets is how many shifted block partitions the forward-maximum bound
// tries; each gives a valid bound and the largest is kept.
const offsets = 2

// New returns an accumulator for a run whose jobs all end by horizon, with
// cold start cold, prewarm containers warm at time 0, and windows sized
// from the function's typical job window slo (its SLO).
func New(cold, horizon, slo time.Duration, prewarm int) *Acc {
	h := int64(horizon)
	cell := max(int64(10*time.Millisecond), h/200_000)
	a := &Acc{cold: int64(cold), cell: cell, prewarm: max(0, prewarm), phi: -1}
	cells := int(h/cell) + 2
	for _, f := range []float64{1.1, 1.25, 1.5, 2, 3, 5, 10} {
		if l := int64(f * float64(slo)); l > cell {
			a.lens = append(a.lens, l)
		}
	}
	if a.cold > 2*cell {
		a.phi = len(a.lens)
		a.lens = append(a.lens, a.cold-cell)
		a.blockLen = max(cell, a.cold/cell*cell)
		for o := range a.blocks {
			a.blocks[o] = make([]float64, int(h/a.blockLen)+3)
		}
	}
	a.comp = make([]int32, cells+1)
	for _, l := range a.lens {
		a.wins = append(a.wins, window{q: l / cell, r: l % cell})
	}
	a.cells = cells + 1
	a.dens = make([]float64, a.cells*len(a.lens))
	return a
}

// window is a window length's quotient and remainder by the cell.
type window struct{ q, r int64 }

// den is window k's difference array value at cell i.
func (a *Acc) den(i, k int) float64 { return a.dens[i*len(a.wins)+k] }

// Add records a job. A job whose window cannot hold it is impossible to
// serve in time; it still counts as work.
func (a *Acc) Add(j Job) {
	p := float64(j.Exec)
	a.work += p
	a.n++
	// The job lies in [i·δ, i·δ+l] iff i·δ <= Release and Deadline <= i·δ + l,
	// so i runs from ceil((Deadline − l)/δ) to floor(Release/δ). With
	// Deadline = qD·δ + rD and l = qL·δ + rL (0 <= rD, rL < δ), the first
	// is qD − qL, plus one when rD > rL: the same integers as dividing
	// for every window, for two divisions in all.
	qD := floorDiv(j.Deadline, a.cell)
	rD := j.Deadline - qD*a.cell
	// Every window's span of cells ends at the release's: the job's
	// subtractions are side by side (dens). Each value still takes the
	// same additions in the same order as with one array per window.
	if hi := min(floorDiv(j.Release, a.cell), int64(a.cells-2)); hi >= 0 {
		n := int64(len(a.wins))
		end := a.dens[(hi+1)*n : (hi+2)*n]
		for k, w := range a.wins {
			lo := qD - w.q
			if rD > w.r {
				lo++
			}
			if lo = max(lo, 0); lo <= hi {
				a.dens[lo*n+int64(k)] += p
				end[k] -= p
			}
		}
	}
	if lo, hi := ceilDiv(j.Deadline-j.Exec, a.cell), floorDiv(j.Release+j.Exec, a.cell)-1; lo <= hi {
		lo, hi = max(lo, 0), min(hi, int64(len(a.comp)-2))
		if lo <= hi {
			a.comp[lo]++
			a.comp[hi+1]--
		}
	}
	if a.phi < 0 {
		return
	}
	for o := range a.blocks {
		shift := int64(o) * a.blockLen / offsets
		b := a.blocks[o]
		// The job can only run inside [Release, Deadline]; in each block it
		// can do at most its overlap with that window, and at most Exec.
		first := floorDiv(j.Release+shift, a.blockLen)
		last := floorDiv(j.Deadline+shift, a.blockLen)
		for i := max(first, 0); i <= last && i < int64(len(b)); i++ {
			s, e := i*a.blockLen-shift, (i+1)*a.blockLen-shift
			ov := min(e, j.Deadline) - max(s, j.Release)
			if ov > 0 {
				b[i] += min(p, float64(ov))
			}
		}
	}
}

// Result is the bound for one function.
type Result struct {
	Jobs int64
	// Work is the total execution time (ns): the container-time of the
	// busy cores, which no policy can go below.
	Work float64
	// Area is the lower bound on container-time (ns) at 100% SLO
	// compliance: Work plus the cold starts the trace forces.
	Area float64
	// PeakNeed is the most containers the densest window needs at once;
	// ForcedStarts is PeakNeed less the warm containers at time 0.
	PeakNeed, ForcedStarts int
	// Anticipation is the container-time the forward-maximum argument adds
	// over Work (containers that must be live a cold start before a rise).
	Anticipation float64
}

// Result computes the bound.
func (a *Acc) Result() Result {
	r := Result{Jobs: a.n, Work: a.work}
	// One pass over the cells sums every window's difference array.
	n := len(a.lens)
	run := make([]float64, n)
	for i := range a.cells - 1 {
		for k, v := range a.dens[i*n : (i+1)*n] {
			run[k] += v
			r.PeakNeed = max(r.PeakNeed, need(run[k], a.lens[k]))
		}
	}
	cover := a.cover()
	for _, c := range cover {
		r.PeakNeed = max(r.PeakNeed, int(c))
	}
	r.ForcedStarts = max(0, r.PeakNeed-a.prewarm)
	if a.phi >= 0 {
		r.Anticipation = a.anticipation(cover)
	}
	r.Area = a.work + max(float64(a.cold)*float64(r.ForcedStarts), r.Anticipation)
	return r
}

// anticipation is the forward-maximum bound. A container busy at time u
// was started no later than u - c and has been live since, so the live
// containers at t are at least the most busy at any u in [t, t+c], which
// is at least h(t), the whole-window work of [t, t+c] over its length,
// rounded up. Per block I of a partition, the live time above the busy
// time is then at least the integral of h over I less the most work that
// can be done in I; summing the positive parts over the blocks gives
// container-time that comes on top of Work.
func (a *Acc) anticipation(cover []int32) float64 {
	l := a.lens[a.phi]
	h := make([]float64, a.cells)
	run := 0.0
	for i := range a.cells - 1 {
		run += a.den(i, a.phi)
		h[i] = float64(need(run, l))
	}
	// The busy containers at any u in a cell are at least the compulsory
	// parts covering that whole cell; the window [iδ+δ, iδ+c] holds cells
	// i+1 .. i+k-1 whole. h[i+1] takes the largest (a sliding maximum).
	k := int(a.cold / a.cell)
	var dq []int // cells of cover in the window, decreasing cover
	for i := len(cover) - 1; i >= 0; i-- {
		// Window for h[i+1] is cells i+1 .. i+k-1; build it moving left.
		if j := i + 1; j < len(cover) {
			for len(dq) > 0 && cover[dq[len(dq)-1]] <= cover[j] {
				dq = dq[:len(dq)-1]
			}
			dq = append(dq, j)
		}
		for len(dq) > 0 && dq[0] > i+k-1 {
			dq = dq[1:]
		}
		if len(dq) > 0 && i+1 < len(h) {
			h[i+1] = max(h[i+1], float64(cover[dq[0]]))
		}
	}
	best := 0.0
	for o := range a.blocks {
		shift := int64(o) * a.blockLen / offsets
		sum := 0.0
		for b, most := range a.blocks[o] {
			s, e := int64(b)*a.blockLen-shift, int64(b+1)*a.blockLen-shift
			// Cells i with [iδ, (i+1)δ) inside [s, e): h at cell i bounds
			// the live count there by the window starting at (i+1)δ.
			integral := 0.0
			for i := ceilDiv(max(s, 0), a.cell); (i+1)*a.cell <= e; i++ {
				if i+1 < int64(len(h)) {
					integral += h[i+1] * float64(a.cell)
				}
			}
			sum += max(0, integral-most)
		}
		best = max(best, sum)
	}
	return best
}

// cover is the compulsory parts covering each whole cell.
func (a *Acc) cover() []int32 {
	out := make([]int32, len(a.comp)-1)
	var run int32
	for i := range out {
		run += a.comp[i]
		out[i] = run
	}
	return out
}

// need is the containers that work w confined to a window of length l
// needs: a container does at most l of it, and containers are whole.
func need(w float64, l int64) int {
	if w <= 0 {
		return 0
	}
	x := w / float64(l)
	return int(math.Ceil(x - 1e-9*max(1, x)))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }
