package rtcontroller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/tools/leaderelection"

	"gantry.dev/gantry/pkg/rtqueue"
)

// AppConfig is everything "gantry controller" wires together.
type AppConfig struct {
	Options     Options // Engine and Registerer are filled in by RunApp
	QueueKind   string
	FIFOWorkers int
	Pool        rtqueue.PoolConfig
	// Critical says which criticalities are critical: they run SCHED_FIFO,
	// spread over its range, and may take reserve workers. It replaces
	// Pool's mapping and reserve floor; the zero value leaves Pool as it is.
	Critical rtqueue.CriticalBand
	// ReserveFloor, if not 0, moves the reserve floor away from the band's
	// start.
	ReserveFloor int
	HTTPAddress  string // /healthz, /readyz, /metrics; "" disables
	LeaderElect  bool
	Leader       LeaderElection
	// TraceFile, if set, receives a JSON line per ReconcileTrace (see
	// TraceFile), for a benchmark in another process.
	TraceFile string
}

// PoolConfig is the worker pool the rtqueue engine runs: Pool with the
// critical band applied.
func (cfg AppConfig) PoolConfig() rtqueue.PoolConfig {
	if cfg.Critical == (rtqueue.CriticalBand{}) {
		return cfg.Pool
	}
	pool := cfg.Critical.Apply(cfg.Pool)
	if cfg.ReserveFloor != 0 {
		pool.ReserveFloor = cfg.ReserveFloor
	}
	return pool
}

// Validate reports a worker pool or critical band the rtqueue engine
// would refuse, so a command can reject bad flags before it connects.
func (cfg AppConfig) Validate() error {
	if cfg.QueueKind != QueueRT {
		return nil
	}
	if cfg.Critical != (rtqueue.CriticalBand{}) {
		if err := cfg.Critical.Validate(); err != nil {
			return err
		}
	}
	return cfg.PoolConfig().Validate()
}

// RunApp runs the controller with its HTTP endpoints until ctx ends.
func RunApp(ctx context.Context, cfg AppConfig) error {
	// The HTTP address is taken first: a port in use is the user's mistake
	// to name at once, not a failure found later among the informers'.
	ln, err := listenHTTP(cfg.HTTPAddress)
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.Close() // after ServeListener returns this is a no-op
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pool := cfg.PoolConfig()
	engine, err := NewEngine(cfg.QueueKind, cfg.FIFOWorkers, pool, reg)
	if err != nil {
		return err
	}
	if cfg.QueueKind == QueueRT && os.Getenv("GOMAXPROCS") == "" {
		// A thread-locked worker needs a P to run; see rtqueue's docs.
		runtime.GOMAXPROCS(rtqueue.RecommendedGOMAXPROCS(pool, runtime.NumCPU()))
	}
	opts := cfg.Options
	opts.Engine, opts.Registerer = engine, reg
	if cfg.TraceFile != "" {
		tf, err := OpenTraceFile(cfg.TraceFile)
		if err != nil {
			return err
		}
		opts.Trace = tf.Add
		log := opts.Logger
		if log == nil {
			log = slog.Default()
		}
		defer func() {
			if n := tf.Dropped(); n > 0 {
				log.Warn("reconcile traces dropped: the trace file's queue was full", "dropped", n)
			}
			if err := tf.Close(); err != nil {
				log.Warn("trace file", "err", err)
			}
		}()
	}
	if opts.CriticalFloor == 0 {
		opts.CriticalFloor = cfg.criticalFloor()
	}
	c, err := New(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var checks []HealthCheck
	if cfg.LeaderElect {
		cfg.Leader.Watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		checks = append(checks, cfg.Leader.Watchdog.Check)
	}
	serveErr := make(chan error, 1)
	if ln != nil {
		go func() {
			err := ServeListener(ctx, ln, c.Handler(reg, checks...))
			serveErr <- err
			if err != nil {
				cancel(err)
			}
		}()
	} else {
		serveErr <- nil
	}
	runErr := run(ctx, c, cfg)
	cancel(nil)
	return errors.Join(runErr, ignoreClosed(<-serveErr))
}

// listenHTTP listens on addr for the controller's endpoints; "" is none.
func listenHTTP(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rtcontroller: --http-address %s: %w", addr, err)
	}
	return ln, nil
}

func run(ctx context.Context, c *Controller, cfg AppConfig) error {
	if cfg.LeaderElect {
		return c.RunLeaderElected(ctx, cfg.Leader)
	}
	return c.Run(ctx)
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("http server: %w", err)
}

// criticalFloor is the lowest criticality the client's critical reserve
// serves: the start of the critical band, as for the engine's reserve.
func (cfg AppConfig) criticalFloor() int {
	if cfg.Critical != (rtqueue.CriticalBand{}) {
		return cfg.Critical.From
	}
	if cfg.Pool.ReserveFloor > 0 {
		return cfg.Pool.ReserveFloor
	}
	return rtqueue.DefaultCriticalBand().From
}
