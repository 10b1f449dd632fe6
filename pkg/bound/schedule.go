package bound

import (
	"context"
	"fmt"
	"slices"
)

// Step is a change of a plan's live containers: from At on, Live are live.
type Step struct {
	At   int64
	Live int
}

// Schedule plans a clairvoyant schedule of jobs of one function on
// containers with the Planner's greedy (best fit; see Planner) and returns
// every job's planned completion (in the order of jobs) and the planned
// live containers over time. It is a greedy, not an optimum. maxQueue > 0
// bounds the jobs waiting at once, as the Planner's maxWait does.
//
// A job that cannot meet its deadline even on a new container (its
// release is within a cold start of time 0 and no warm container is left)
// runs as early as it can; missed counts them.
func Schedule(jobs []Job, cold int64, prewarm int, maxQueue int) (ends []int64, steps []Step, missed int) {
	ends, steps, missed, _ = ScheduleContext(context.Background(), jobs, cold, prewarm, maxQueue)
	return ends, steps, missed
}

// checkEvery is how many jobs ScheduleContext handles between two looks
// at its context: at about 100 ns a job, a few milliseconds.
const checkEvery = 1 << 16

// ScheduleContext is Schedule that stops when ctx ends, within checkEvery
// jobs of sorting or planning, and returns an error wrapping
// context.Cause(ctx).
func ScheduleContext(ctx context.Context, jobs []Job, cold int64, prewarm int, maxQueue int) (ends []int64, steps []Step, missed int, err error) {
	order, err := releaseOrder(ctx, jobs, checkEvery)
	if err != nil {
		return nil, nil, 0, err
	}
	ends = make([]int64, len(jobs))
	var edges edgeSink
	p := NewPlanner(1, cold, []int{max(0, prewarm)}, 0, maxQueue, &edges)
	for n, i := range order {
		if n%checkEvery == 0 && ctx.Err() != nil {
			return nil, nil, 0, stopped(ctx, n, len(order))
		}
		_, _, end, _ := p.Place(0, jobs[i])
		if end > jobs[i].Deadline {
			missed++
		}
		ends[i] = end
	}
	p.Finish()
	slices.SortStableFunc(edges, func(a, b Step) int { return cmp64(a.At, b.At) })
	live := 0
	for _, e := range edges {
		live += e.Live
		if n := len(steps); n > 0 && steps[n-1].At == e.At {
			steps[n-1].Live = live
			continue
		}
		steps = append(steps, Step{At: e.At, Live: live})
	}
	return ends, steps, missed, nil
}

// edgeSink records a plan's starts (+1) and retirements (-1) as steps
// whose Live holds the change.
type edgeSink []Step

func (s *edgeSink) Start(_ int32, _ int, at int64, _ bool) { *s = append(*s, Step{At: at, Live: +1}) }
func (s *edgeSink) Retire(_ int32, at int64, _ int32)      { *s = append(*s, Step{At: at, Live: -1}) }

func stopped(ctx context.Context, done, total int) error {
	return fmt.Errorf("bound: stopped planning after %d of %d jobs: %w", done, total, context.Cause(ctx))
}

// byRelease orders jobs by release, then deadline.
func byRelease(jobs []Job) func(x, y int32) int {
	return func(x, y int32) int {
		a, b := &jobs[x], &jobs[y]
		if a.Release != b.Release {
			return cmp64(a.Release, b.Release)
		}
		return cmp64(a.Deadline, b.Deadline)
	}
}

// releaseOrder is the indices of jobs stably sorted by release, then
// deadline. Jobs already in that order (the first function's, released at
// arrival) are not sorted again. Otherwise runs of run jobs are sorted
// and merged pairwise, looking at ctx between runs and every checkEvery
// merged jobs, so that a large sort can be stopped.
func releaseOrder(ctx context.Context, jobs []Job, run int) ([]int32, error) {
	order := make([]int32, len(jobs))
	for i := range order {
		order[i] = int32(i)
	}
	less := byRelease(jobs)
	if slices.IsSortedFunc(order, less) {
		return order, nil
	}
	for lo := 0; lo < len(order); lo += run {
		if ctx.Err() != nil {
			return nil, stopped(ctx, 0, len(order))
		}
		slices.SortStableFunc(order[lo:min(len(order), lo+run)], less)
	}
	buf := make([]int32, len(order))
	for width := run; width < len(order); width *= 2 {
		for lo := 0; lo < len(order); lo += 2 * width {
			mid, hi := min(len(order), lo+width), min(len(order), lo+2*width)
			if err := merge(ctx, buf[lo:hi], order[lo:mid], order[mid:hi], less); err != nil {
				return nil, err
			}
		}
		order, buf = buf, order
	}
	return order, nil
}

// merge merges the sorted a and b into dst, taking from a on ties (so the
// merge is stable).
func merge(ctx context.Context, dst, a, b []int32, less func(x, y int32) int) error {
	i, j := 0, 0
	for k := range dst {
		if k%checkEvery == 0 && ctx.Err() != nil {
			return stopped(ctx, 0, len(dst))
		}
		if j >= len(b) || (i < len(a) && less(a[i], b[j]) <= 0) {
			dst[k] = a[i]
			i++
		} else {
			dst[k] = b[j]
			j++
		}
	}
	return nil
}

// Area is the container-time of a plan's steps up to end.
func Area(steps []Step, end int64) float64 {
	var a float64
	for i, s := range steps {
		next := end
		if i+1 < len(steps) {
			next = min(end, steps[i+1].At)
		}
		if next > s.At {
			a += float64(s.Live) * float64(next-s.At)
		}
	}
	return a
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
