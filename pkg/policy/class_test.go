package policy

import (
	"testing"
	"time"
)

func TestAsyncBudgetStretchesTheChainToTheAsyncDeadline(t *testing.T) {
	for _, c := range []struct {
		cum, slo, async, want time.Duration
	}{
		{time.Second, time.Second, time.Minute, time.Minute},                 // one function: the async deadline
		{time.Second, 4 * time.Second, time.Minute, 15 * time.Second},        // a quarter of the chain's SLO
		{4 * time.Second, 4 * time.Second, 2 * time.Second, 4 * time.Second}, // never tighter than the SLO
		{time.Second, 0, time.Minute, time.Second},                           // no app SLO: the sync budget
	} {
		if got := AsyncBudget(c.cum, c.slo, c.async); got != c.want {
			t.Errorf("AsyncBudget(%v, %v, %v) = %v, want %v", c.cum, c.slo, c.async, got, c.want)
		}
	}
}

func TestEnterShiftsOnlyAsyncRequests(t *testing.T) {
	if e := Enter(Sync, 10, 100, 50, 7); e != (Entry{Enq: 10, Deadline: 100, Pred: 7}) {
		t.Errorf("sync entry %+v: a sync request keeps its arrival", e)
	}
	if e := Enter(Async, 10, 100, 50, 7); e != (Entry{Enq: 60, Deadline: 100, Pred: 7}) {
		t.Errorf("async entry %+v: want Enq moved by the slack", e)
	}
	if e := Enter(Async, 10, 100, -5, 7); e.Enq != 10 {
		t.Errorf("async entry %+v: a negative slack must not move it ahead", e)
	}
}
