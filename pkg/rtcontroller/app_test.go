package rtcontroller

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/rtqueue"
)

// The paper's RQ1 services have criticalities 1..10. With the controller
// configured for that band (--critical-from 1 --critical-to 10), the engine
// it builds serves them as critical: reserve workers and SCHED_FIFO.
func TestCriticalBandReachesTheEngine(t *testing.T) {
	cfg := AppConfig{QueueKind: QueueRT, FIFOWorkers: 1, Pool: rtqueue.DefaultPoolConfig(), Critical: rtqueue.PaperCriticalBand()}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	engine, err := NewEngine(cfg.QueueKind, cfg.FIFOWorkers, cfg.PoolConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := engine.(*rtEngine).cfg
	if pool.ReserveFloor != 1 {
		t.Fatalf("reserve floor %d, want 1: criticality 1 must reach the reserve", pool.ReserveFloor)
	}
	for c := 1; c <= 10; c++ {
		if p := pool.Mapping.Busy(c); p.Policy != rtqueue.PolicyFIFO {
			t.Fatalf("criticality %d runs %v, want SCHED_FIFO", c, p)
		}
	}
	if p := pool.Mapping.Busy(0); p.Policy != rtqueue.PolicyOther {
		t.Fatalf("criticality 0 runs %v, want SCHED_OTHER", p)
	}
	cfg.ReserveFloor = 5
	if got := cfg.PoolConfig().ReserveFloor; got != 5 {
		t.Fatalf("an explicit reserve floor became %d, want 5", got)
	}
}

func TestBadCriticalBandIsRejectedBeforeStart(t *testing.T) {
	for _, b := range []rtqueue.CriticalBand{
		{From: 0, To: 10, MinRT: 50, MaxRT: 93},
		{From: 10, To: 5, MinRT: 50, MaxRT: 93},
		{From: 1, To: 10, MinRT: 50, MaxRT: 99},
	} {
		cfg := AppConfig{QueueKind: QueueRT, Pool: rtqueue.DefaultPoolConfig(), Critical: b}
		if err := cfg.Validate(); !errors.Is(err, rtqueue.ErrInvalidConfig) {
			t.Errorf("band %+v: Validate = %v, want ErrInvalidConfig", b, err)
		}
	}
	fifo := AppConfig{QueueKind: QueueFIFO, Critical: rtqueue.CriticalBand{From: 0}}
	if err := fifo.Validate(); err != nil {
		t.Errorf("the fifo engine has no band, yet Validate = %v", err)
	}
}

// A busy --http-address is named as such before anything connects: it
// used to surface as "caches did not sync" once the informers gave up.
func TestBusyHTTPAddressIsNamedBeforeStart(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := AppConfig{QueueKind: QueueFIFO, FIFOWorkers: 1, HTTPAddress: busy.Addr().String(),
		Options: Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}}}
	err = RunApp(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "--http-address "+busy.Addr().String()) ||
		!strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("RunApp = %v, want the busy --http-address named", err)
	}
	if ctx.Err() != nil {
		t.Fatal("RunApp waited for its context instead of failing at once")
	}
}
