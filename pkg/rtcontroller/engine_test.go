package rtcontroller

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// The FIFO ablation must keep client-go's semantics: a failed key comes back
// with backoff and a panicking handler does not take the controller down.
func TestFIFOEngineRetriesFailuresAndSurvivesPanics(t *testing.T) {
	var logged bytes.Buffer
	var logMu sync.Mutex
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, nil)))
	defer slog.SetDefault(prev)
	e := NewFIFOEngine(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := map[Key]int{}
	done := make(chan struct{})
	h := func(_ context.Context, k Key) error {
		mu.Lock()
		defer mu.Unlock()
		calls[k]++
		switch {
		case k.Name == "flaky" && calls[k] == 1:
			return errors.New("transient")
		case k.Name == "panicky" && calls[k] == 1:
			panic("bad object")
		}
		if calls[Key{Name: "flaky"}] == 2 && calls[Key{Name: "panicky"}] == 2 {
			close(done)
		}
		return nil
	}
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx, h) }()
	e.Queue().AddWithPriority(Key{Name: "flaky"}, 10)
	e.Queue().AddWithPriority(Key{Name: "panicky"}, 90)
	<-done
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if calls[Key{Name: "flaky"}] != 2 || calls[Key{Name: "panicky"}] != 2 {
		t.Fatalf("calls = %v, want each key retried once", calls)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if out := logged.String(); !strings.Contains(out, "panicked") || !strings.Contains(out, "bad object") || !strings.Contains(out, "goroutine") {
		t.Fatalf("the panic was not logged with its value and stack:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
