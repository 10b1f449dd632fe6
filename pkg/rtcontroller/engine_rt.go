package rtcontroller

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"gantry.dev/gantry/pkg/rtqueue"
)

// rtEngine is the priority-preemptive engine: a multi-priority queue served
// by real-time, thread-locked workers with a reserve for critical keys.
type rtEngine struct {
	q   *rtqueue.Queue[Key]
	cfg rtqueue.PoolConfig
}

// NewRTEngine returns the rtqueue engine. Its metrics (depth and wait per
// priority band, workers, scheduling policy) go to reg.
func NewRTEngine(cfg rtqueue.PoolConfig, reg prometheus.Registerer) Engine {
	q := rtqueue.New(rtqueue.Config[Key]{Name: "rtresource", Registerer: reg})
	return &rtEngine{q: q, cfg: cfg}
}

func (e *rtEngine) Queue() Queue { return e.q }

func (e *rtEngine) Run(ctx context.Context, h Handler) error {
	return rtqueue.NewPool(e.q, rtqueue.Handler[Key](h), e.cfg).Run(ctx)
}

// NewEngine picks an engine by the --queue name.
func NewEngine(kind string, fifoWorkers int, pool rtqueue.PoolConfig, reg prometheus.Registerer) (Engine, error) {
	switch kind {
	case QueueRT:
		// A bad pool must fail here: found only when the engine starts, it
		// would leave a replica that won the lease holding it idle.
		if err := pool.Validate(); err != nil {
			return nil, err
		}
		return NewRTEngine(pool, reg), nil
	case QueueFIFO:
		return NewFIFOEngine(fifoWorkers), nil
	default:
		return nil, fmt.Errorf("%w %q: want %q or %q", ErrUnknownQueue, kind, QueueRT, QueueFIFO)
	}
}
