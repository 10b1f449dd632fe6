// Package ctxtime holds the time helpers that stop with a context.
package ctxtime

import (
	"context"
	"time"
)

// Sleep pauses for d or until ctx is done, whichever comes first. It
// returns ctx.Err() when ctx ended the pause, nil when d passed. A d of
// zero or less does not wait but still reports a context that is already
// done, so a loop that sleeps between steps stops at its next Sleep.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
