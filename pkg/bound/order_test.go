package bound

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// The run-and-merge sort gives the order a stable sort by (release,
// deadline) gives, ties included, on jobs out of release order (a later
// function's, released when the stage before ends) over several runs.
func TestReleaseOrderIsTheStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const run = 64
	for _, n := range []int{0, 1, 1000, 5*run + 7, 9000} {
		jobs := make([]Job, n)
		for i := range jobs {
			jobs[i] = Job{Release: rng.Int64N(int64(n)/4 + 1), Deadline: rng.Int64N(3)}
		}
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortStableFunc(want, byRelease(jobs))
		got, err := releaseOrder(context.Background(), jobs, run)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("n=%d: order differs from the stable sort (err %v)", n, err)
		}
		if got, err = releaseOrder(context.Background(), jobs, checkEvery); err != nil || !slices.Equal(got, want) {
			t.Fatalf("n=%d: order differs from the stable sort (err %v)", n, err)
		}
	}
}

// A stopped context ends the planning with its cause, before any plan is
// returned, whether the jobs need sorting or not.
func TestScheduleStopsOnItsContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("SIGTERM")
	cancel(cause)
	sorted := make([]Job, 1000)
	for i := range sorted {
		sorted[i] = Job{Release: int64(i), Deadline: int64(i) + 10, Exec: 5}
	}
	shuffled := slices.Clone(sorted)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for name, jobs := range map[string][]Job{"sorted": sorted, "shuffled": shuffled} {
		ends, steps, _, err := ScheduleContext(ctx, jobs, 3, 0, 0)
		if !errors.Is(err, cause) || ends != nil || steps != nil {
			t.Errorf("%s: err %v, %d ends, %d steps; want the cause and no plan", name, err, len(ends), len(steps))
		}
	}
	if _, steps, _, err := ScheduleContext(context.Background(), shuffled, 3, 0, 0); err != nil || len(steps) == 0 {
		t.Errorf("not stopped: err %v, %d steps", err, len(steps))
	}
}
