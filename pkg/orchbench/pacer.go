package orchbench

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// pacer schedules the interference's bursts on a fixed grid: burst k is
// due at start + k*every. A burst that could not start on time (the last
// one was still being created or deleted) starts as soon as the last one
// ends, so an arm whose API server falls behind catches up while it can,
// and how far behind it got is recorded (lag) instead of silently lowering
// its rate. every 0 is no grid: each burst starts when the last ends, the
// paper's back-to-back continuous mode, whose rate is whatever each arm's
// API server absorbs.
type pacer struct {
	clk   clock.Clock
	every time.Duration
	start time.Time
	burst int // objects per burst

	bursts int           // bursts started
	late   int           // bursts that started more than every/2 after they were due
	maxLag time.Duration // the most a burst started after it was due
}

func newPacer(clk clock.Clock, every time.Duration, burst int) *pacer {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &pacer{clk: clk, every: every, start: clk.Now(), burst: burst}
}

// next waits until the next burst is due, or ctx ends (its error).
func (p *pacer) next(ctx context.Context) error {
	if p.bursts > 0 && p.every > 0 {
		due := p.start.Add(time.Duration(p.bursts) * p.every)
		if wait := due.Sub(p.clk.Now()); wait > 0 {
			t := p.clk.NewTimer(wait)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		if err := ctx.Err(); err != nil {
			return err // the end, not a late burst
		}
		if lag := p.clk.Now().Sub(due); lag > 0 {
			p.maxLag = max(p.maxLag, lag)
			if lag > p.every/2 {
				p.late++
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p.bursts++
	return nil
}

// pace is what the pacer saw, for the report, up to now or to ctx's
// deadline if that came first: deletes that outlive the iteration are not
// time the grid could have used.
func (p *pacer) pace(ctx context.Context) churnPace {
	elapsed := p.clk.Since(p.start)
	if d, ok := ctx.Deadline(); ok && d.Sub(p.start) < elapsed {
		elapsed = max(d.Sub(p.start), 0)
	}
	cp := churnPace{elapsed: elapsed, bursts: p.bursts, late: p.late, maxLag: p.maxLag}
	if p.every > 0 {
		cp.target = float64(p.burst) / p.every.Seconds()
		// Bursts due before the end: the grid's slots in [start, end).
		cp.dueObjects = p.burst * int((elapsed+p.every-1)/p.every)
	}
	return cp
}

// churnPace is one arm's interference schedule in one iteration.
type churnPace struct {
	elapsed    time.Duration
	bursts     int
	late       int
	maxLag     time.Duration
	target     float64 // objects/s the grid asks for; 0 without a grid
	dueObjects int     // objects the grid asked for before the end
}
