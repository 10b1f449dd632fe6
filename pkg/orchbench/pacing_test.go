package orchbench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// countingTarget counts the churn it is sent and nothing else.
type countingTarget struct{ created, deleted atomic.Int64 }

func (c *countingTarget) createService(context.Context, string, int32) (int64, error) { return 1, nil }
func (c *countingTarget) scale(context.Context, string, int) (int64, error)           { return 1, nil }
func (c *countingTarget) createChurn(context.Context, string) error {
	c.created.Add(1)
	return nil
}
func (c *countingTarget) deleteChurn(context.Context, string) error {
	c.deleted.Add(1)
	return nil
}

func TestChurnRateCapsContinuousInterference(t *testing.T) {
	const window = 600 * time.Millisecond
	for _, rate := range []float64{50, 200} {
		tg := &countingTarget{}
		ctx, cancel := context.WithTimeout(context.Background(), window)
		created := churnLoop(context.Background(), ctx, tg, Case{Mode: ModeContinuous, Burst: 10}, 0, pacing{period: time.Second, rate: rate})
		cancel()
		// At most one burst ahead of the rate (the first goes at once),
		// and the loop does keep going at the rate (the deadline takes at
		// most one burst off it).
		most := int(rate*window.Seconds()) + 10
		least := int(rate*window.Seconds()) - 20
		if created > most || created < least {
			t.Errorf("rate %v/s for %v: created %d, want %d..%d", rate, window, created, least, most)
		}
		if tg.deleted.Load() != tg.created.Load() {
			t.Errorf("rate %v/s: %d created, %d deleted: churn left behind", rate, tg.created.Load(), tg.deleted.Load())
		}
	}
	// Without a rate, continuous churn goes back to back.
	tg := &countingTarget{}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if created := churnLoop(context.Background(), ctx, tg, Case{Mode: ModeContinuous, Burst: 10}, 0, pacing{period: time.Second}); created < 200 {
		t.Errorf("unpaced churn created only %d objects in 100 ms against an instant target", created)
	}
}
