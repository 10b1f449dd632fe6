package ctxtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepReturnsNilOnceTheDurationHasPassed(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 0, time.Millisecond} {
		if err := Sleep(context.Background(), d); err != nil {
			t.Errorf("Sleep(%v) = %v, want nil", d, err)
		}
	}
}

// A cancelled context ends the pause at once: the hour never passes, so
// the test would time out if Sleep waited for it.
func TestSleepStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{0, time.Hour} {
		if err := Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep(cancelled, %v) = %v, want context.Canceled", d, err)
		}
	}
}

func TestSleepReportsADeadlineThatEndsThePause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Sleep past the deadline = %v, want context.DeadlineExceeded", err)
	}
}
