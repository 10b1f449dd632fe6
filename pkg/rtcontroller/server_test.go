package rtcontroller

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/rtqueue"
)

func newOfflineController(t *testing.T, reg prometheus.Registerer) *Controller {
	t.Helper()
	c, err := New(Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}, Engine: NewFIFOEngine(1), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestProbesAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newOfflineController(t, reg)
	healthy := true
	h := c.Handler(reg, func(*http.Request) error {
		if !healthy {
			return errors.New("lease renewal stalled")
		}
		return nil
	})
	if code, _ := get(t, h, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the caches synced = %d, want 503", code)
	}
	c.synced.Store(true)
	if code, _ := get(t, h, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after sync = %d, want 200", code)
	}
	if code, _ := get(t, h, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	healthy = false
	if code, body := get(t, h, "/healthz"); code != http.StatusInternalServerError || !strings.Contains(body, "stalled") {
		t.Errorf("/healthz with a failing check = %d %q, want 500 naming the check", code, body)
	}
	c.metrics.reconciles.WithLabelValues(outcomeSuccess).Inc()
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, `gantry_rtcontroller_reconcile_total{outcome="success"} 1`) {
		t.Errorf("/metrics lacks the reconcile outcome:\n%s", body)
	}
}

func TestNewRejectsMissingConfigAndDuplicateMetrics(t *testing.T) {
	if _, err := New(Options{Engine: NewFIFOEngine(1)}); !errors.Is(err, ErrNoConfig) {
		t.Errorf("New without config = %v, want ErrNoConfig", err)
	}
	reg := prometheus.NewRegistry()
	newOfflineController(t, reg)
	if _, err := New(Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}, Engine: NewFIFOEngine(1), Registerer: reg}); err == nil {
		t.Error("second controller on one registry: want a registration error")
	}
}

func TestNewEngineRejectsUnknownQueue(t *testing.T) {
	if _, err := NewEngine("lifo", 1, rtqueue.DefaultPoolConfig(), nil); !errors.Is(err, ErrUnknownQueue) {
		t.Fatalf("NewEngine(lifo) = %v, want ErrUnknownQueue", err)
	}
	bad := rtqueue.DefaultPoolConfig()
	bad.ReserveFloor = 150
	if _, err := NewEngine(QueueRT, 1, bad, nil); !errors.Is(err, rtqueue.ErrInvalidConfig) {
		t.Fatalf("NewEngine with reserve floor 150 = %v, want ErrInvalidConfig before anything runs", err)
	}
}

// Without leader election the single replica reconciles, so it must read as
// the active one on /metrics while it runs, and stop doing so when it stops.
func TestActiveReplicaMetricWithoutLeaderElection(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newOfflineController(t, reg)
	h := c.Handler(reg)
	const on, off = "gantry_rtcontroller_leader 1", "gantry_rtcontroller_leader 0"
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, off) {
		t.Fatalf("before running: /metrics lacks %q", off)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.reconcileWhileActive(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for _, body := get(t, h, "/metrics"); !strings.Contains(body, on) || !c.IsLeader(); _, body = get(t, h, "/metrics") {
		if time.Now().After(deadline) {
			t.Fatalf("running replica never reported %q", on)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("engine: %v", err)
	}
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, off) || c.IsLeader() {
		t.Fatalf("stopped replica still reports itself active")
	}
}
