package liverun

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"gantry.dev/gantry/examples"
	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// What instances a side-by-side run serves.
const (
	// FunctionsReplay serves the app's model-replay functions (`gantry fn
	// replay`): each sleeps for the profiled execution time of its input
	// size, so the gateways' instances do not compete for the CPU and
	// every policy meets the execution times the paper's models give.
	FunctionsReplay = "replay"
	// FunctionsReal serves the real example functions of examples/stack.yml.
	FunctionsReal = "real"
)

// Defaults of `gantry up`: a load where the policies' decisions matter.
var (
	// DefaultPolicies are compared when none are named: Gantry, the
	// Cypress paper's policy and its baseline Atoll, Knative's autoscaler
	// and a commercial platform's keep-alive.
	DefaultPolicies = []string{"gantry", "cypress", "atoll", "knative", "commercial"}
)

const (
	// DefaultUpApp is one function whose execution time grows 20-fold
	// with its input size (36-729 ms): a chain of three would triple the
	// instance processes that the gateways start on a 2-core machine.
	DefaultUpApp = "sentiment-analysis"
	// DefaultUpTrace is bursty: the twitter trace's rate swings within
	// seconds, so a policy that sizes for the mean misses the SLO.
	DefaultUpTrace = "twitter"
	// DefaultUpRate gives a 90 s run about 1400 requests, so that 99.9%
	// is a share of requests (one may miss) rather than "none may", and
	// its bursts need 10-30 instances per gateway.
	DefaultUpRate = 16
	// DefaultUpStartDelay makes an instance start cost what a container's
	// does when its image is on the node (half a second, plus the
	// process's own start), so starting late is paid for.
	DefaultUpStartDelay = 500 * time.Millisecond
	// DefaultUpDuration and DefaultUpWarmup keep the default run under
	// three minutes.
	DefaultUpDuration = 90 * time.Second
	DefaultUpWarmup   = 20 * time.Second
	// DefaultUpIdleTimeout retires an instance idle this long. The core's
	// default (10 min) outlasts the whole run, so an instance started in
	// a burst would stay to the end and no policy's count could fall.
	DefaultUpIdleTimeout = 30 * time.Second
	// DefaultUpCapacity bounds each gateway's instances alike: above what
	// the simulator has any policy need at the default load (at most 29,
	// atoll, in a burst), and low enough that a storm of starts on a busy
	// machine cannot take it down.
	DefaultUpCapacity = 32
	// DefaultUpSLOFactor sets the SLO at twice the largest execution
	// time (1458 ms for sentiment-analysis). The Cypress paper's 1.2 (875
	// ms) leaves the largest request 146 ms: none can wait for an
	// instance start, so a policy that ever queues a request behind a
	// start misses it, and the machine's own scheduling delays decide the
	// rest (docs/platform.md, "gantry up side by side", has the
	// measurements).
	DefaultUpSLOFactor = 2
	// MaxSLOFactor bounds SLOFactor.
	MaxSLOFactor = 100
)

// UpConfig is one side-by-side run of `gantry up`.
type UpConfig struct {
	// Policies are compared, one gateway process each (default
	// DefaultPolicies).
	Policies []string
	App      string
	Trace    string
	Rate     float64
	Dist     string
	// Warmup runs the same kind of load first, unmeasured (negative: none).
	Warmup   time.Duration
	Duration time.Duration
	Seed     uint64
	// Capacity bounds each gateway's instances; StartDelay is added to
	// every instance's start.
	Capacity   int
	StartDelay time.Duration
	// IdleTimeout is the gateways' --idle-timeout (default
	// DefaultUpIdleTimeout).
	IdleTimeout time.Duration
	// SLOFactor sets the replay functions' end-to-end SLO to this many
	// times the app's largest mean execution time (default
	// DefaultUpSLOFactor; refused with FunctionsReal, whose SLOs are the
	// stack file's).
	SLOFactor float64
	// Functions is FunctionsReplay (default) or FunctionsReal.
	Functions string
	// Exe is the gantry binary the gateways run (default this executable).
	Exe string
	// Progress is called every second with every arm's state.
	Progress func([]ArmProgress)
	// GatewayLog receives the gateways' logs, each line prefixed with its
	// policy (default discarded).
	GatewayLog io.Writer
}

func (c *UpConfig) defaults() error {
	if len(c.Policies) == 0 {
		c.Policies = slices.Clone(DefaultPolicies)
	}
	setDefault(&c.App, DefaultUpApp)
	setDefault(&c.Trace, DefaultUpTrace)
	setDefault(&c.Dist, "uniform")
	setDefault(&c.Functions, FunctionsReplay)
	if c.Rate == 0 {
		c.Rate = DefaultUpRate
	}
	if c.Duration == 0 {
		c.Duration = DefaultUpDuration
	}
	if c.Warmup == 0 {
		c.Warmup = DefaultUpWarmup
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultUpIdleTimeout
	}
	if c.SLOFactor == 0 && c.Functions == FunctionsReplay {
		c.SLOFactor = DefaultUpSLOFactor
	}
	if c.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the gantry binary: %w", err)
		}
		c.Exe = exe
	}
	return nil
}

func setDefault(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

// MaxPolicies bounds the gateways one run starts.
const MaxPolicies = 16

// Validate checks a configuration before anything starts.
func (c *UpConfig) Validate() error {
	if len(c.Policies) > MaxPolicies {
		return fmt.Errorf("%w: at most %d policies, got %d", ErrBadConfig, MaxPolicies, len(c.Policies))
	}
	seen := map[string]bool{}
	for _, p := range c.Policies {
		if err := dispatch.CheckPolicy(p); err != nil {
			return fmt.Errorf("%w: policy: %v", ErrBadConfig, err)
		}
		if seen[p] {
			return fmt.Errorf("%w: policy %q named twice", ErrBadConfig, p)
		}
		seen[p] = true
	}
	switch {
	case !slices.Contains(workload.Names(), c.App):
		return fmt.Errorf("%w: app %q is not one of %v", ErrBadConfig, c.App, workload.Names())
	case !slices.Contains(trace.Names(), c.Trace):
		return fmt.Errorf("%w: trace %q is not one of %v", ErrBadConfig, c.Trace, trace.Names())
	case !slices.Contains(workload.DistNames(), c.Dist):
		return fmt.Errorf("%w: dist %q is not one of %v", ErrBadConfig, c.Dist, workload.DistNames())
	case c.Functions != FunctionsReplay && c.Functions != FunctionsReal:
		return fmt.Errorf("%w: functions %q must be %s or %s", ErrBadConfig, c.Functions, FunctionsReplay, FunctionsReal)
	case !(c.Rate > 0) || c.Rate > MaxRate:
		return fmt.Errorf("%w: rate %v must be in (0, %d]", ErrBadConfig, c.Rate, MaxRate)
	case c.Duration < time.Second || c.Duration > MaxDuration:
		return fmt.Errorf("%w: duration %v must be in [1s, %v]", ErrBadConfig, c.Duration, MaxDuration)
	case c.Warmup > MaxDuration:
		return fmt.Errorf("%w: warm-up %v must be at most %v", ErrBadConfig, c.Warmup, MaxDuration)
	case c.Rate*(c.Duration+max(c.Warmup, 0)).Seconds() > loadgen.MaxRequests:
		return fmt.Errorf("%w: rate %v over %v is more than %d requests", ErrBadConfig, c.Rate, c.Duration+max(c.Warmup, 0), loadgen.MaxRequests)
	case c.Capacity < 0 || c.Capacity > stack.MaxInstances*10:
		return fmt.Errorf("%w: capacity %d must be in [0, %d]", ErrBadConfig, c.Capacity, stack.MaxInstances*10)
	case c.StartDelay < 0 || c.StartDelay > 10*time.Minute:
		return fmt.Errorf("%w: start delay %v must be in [0, 10m]", ErrBadConfig, c.StartDelay)
	case c.SLOFactor != 0 && c.Functions == FunctionsReal:
		return fmt.Errorf("%w: an SLO factor applies to the replay functions; the real functions' SLOs are examples/stack.yml's", ErrBadConfig)
	case c.SLOFactor != 0 && (c.SLOFactor < 1 || c.SLOFactor > MaxSLOFactor):
		return fmt.Errorf("%w: SLO factor %v must be in [1, %d]", ErrBadConfig, c.SLOFactor, MaxSLOFactor)
	case c.IdleTimeout != 0 && (c.IdleTimeout < time.Second || c.IdleTimeout > 24*time.Hour):
		return fmt.Errorf("%w: idle timeout %v must be in [1s, 24h]", ErrBadConfig, c.IdleTimeout)
	}
	return nil
}

// Up serves the app once per policy, each behind its own gateway process,
// drives them all with the same arrivals at the same time and reports them
// side by side.
func Up(ctx context.Context, cfg UpConfig) (*UpReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s, payload, err := upStack(cfg)
	if err != nil {
		return nil, err
	}
	app, err := stackApp(s, cfg.App)
	if err != nil {
		return nil, err
	}
	file, err := writeStackFile(s)
	if err != nil {
		return nil, err
	}
	defer os.Remove(file)
	st, err := appStream(cfg, app, payload)
	if err != nil {
		return nil, err
	}
	ac := armsConfig{exe: cfg.Exe, streams: []streamSpec{st}, functions: len(s.Functions),
		capacity: cfg.Capacity, startDelay: cfg.StartDelay, idleTimeout: cfg.IdleTimeout, gatewayLog: cfg.GatewayLog, progress: cfg.Progress}
	for _, p := range cfg.Policies {
		ac.arms = append(ac.arms, armSpec{name: p, policy: p, stackFile: file})
	}
	results, stopped, err := runArms(ctx, ac)
	if err != nil {
		stopped()
		return nil, err
	}
	rep := newUpReport(cfg, st, results)
	rep.stopped = stopped
	return rep, nil
}

// upStack is the stack the gateways serve and the payload of its app:
// the app's replay functions, or the example functions.
func upStack(cfg UpConfig) (*stack.Stack, string, error) {
	if cfg.Functions == FunctionsReal {
		s, err := stack.Parse("examples/stack.yml", examples.Stack)
		return s, cfg.App, err
	}
	model, err := workload.Lookup(cfg.App)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if cfg.SLOFactor != 0 {
		model.SLO = time.Duration(cfg.SLOFactor * float64(model.MaxExec())).Round(time.Millisecond)
	}
	// Until an instance's start is measured, the policy plans with the
	// start delay plus a process start.
	s, err := ReplayStack(model, cfg.StartDelay+100*time.Millisecond)
	return s, "replay:" + cfg.App, err
}

// stackApp finds an app in s and fills in its end-to-end SLO.
func stackApp(s *stack.Stack, name string) (stack.App, error) {
	for _, a := range s.Apps {
		if a.Name != name {
			continue
		}
		if a.SLO == 0 {
			for _, fn := range a.Functions {
				for _, f := range s.Functions {
					if f.Name == fn {
						a.SLO += f.SLO
					}
				}
			}
		}
		return a, nil
	}
	return stack.App{}, fmt.Errorf("%w: app %q is not in the stack", ErrBadConfig, name)
}

// appStream is the load on the app's chain: the measured trace and the
// warm-up's, the same sizes and payloads for every arm.
func appStream(cfg UpConfig, app stack.App, payload string) (streamSpec, error) {
	model, err := workload.Lookup(cfg.App)
	if err != nil {
		return streamSpec{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	dist, err := workload.LookupDist(cfg.Dist)
	if err != nil {
		return streamSpec{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	gen, err := functions.Payload(payload)
	if err != nil {
		return streamSpec{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	base := loadgen.Config{Dist: dist, MinSize: model.MinSize, MaxSize: model.MaxSize, Payload: loadgen.Payload(gen),
		SLO: app.SLO, Drain: upDrain}
	if !strings.HasPrefix(payload, "replay:") {
		// Real inputs (audio, images, PDFs) cost more to build than to
		// send: a pool of 4 per size bucket, the same for every arm.
		base.Pool = 4
	}
	st := streamSpec{name: app.Name, path: "/app/" + app.Name, slo: app.SLO, load: base, warmup: base}
	if st.load.Trace, err = trace.Generate(cfg.Trace, cfg.Rate, cfg.Duration, cfg.Seed); err != nil {
		return st, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	st.load.Seed = cfg.Seed
	if cfg.Warmup > 0 {
		if st.warmup.Trace, err = trace.Generate(cfg.Trace, cfg.Rate, cfg.Warmup, cfg.Seed+1000); err != nil {
			return st, fmt.Errorf("%w: %v", ErrBadConfig, err)
		}
		st.warmup.Seed = cfg.Seed + 1000
	}
	return st, nil
}
