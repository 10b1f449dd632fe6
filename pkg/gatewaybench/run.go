package gatewaybench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/trace"
)

// Path names, in the report's order.
const (
	PathDirect = "direct"
	// PathGantry runs Gantry's gateway in a process of its own, as `gantry
	// serve` does and as the OpenFaaS gateway runs: the like-for-like path.
	PathGantry = "gantry"
	// PathGantryInproc runs the same gateway inside the benchmark's
	// process, beside the load generator and the instance.
	PathGantryInproc = "gantry-inproc"
	PathProvider     = "provider"
	PathOpenFaaS     = "openfaas"
)

// FunctionName is the function every gateway serves.
const FunctionName = "echo"

const (
	// requestTimeout bounds one request; an echo answers in well under a
	// millisecond, so only a wedged gateway ever reaches it.
	requestTimeout = 10 * time.Second
	// drain bounds the wait for in-flight requests after an interrupt, so
	// that SIGINT ends the run within a second.
	drain = 200 * time.Millisecond
	// histMaxNs is the histogram's top: the request timeout, with room.
	histMaxNs = int64(time.Minute)
)

// path is one way to reach the instance, with what was measured on it.
type path struct {
	name, via, url string
	client         *http.Client
	hist           *hdrhistogram.Histogram
	requests, ok   int64
	errs           map[string]int64
	// cpu is the CPU time the benchmark and its gateway children used
	// during this path's measured turns.
	cpu time.Duration
}

// Run sets up the instance, Gantry's gateway, the provider and (when its
// binary is there and its ports free) the OpenFaaS gateway, then loads each
// path in rotating rounds and reports. A cancelled ctx stops it within a
// second and returns what was measured, with Interrupted set; errors are for
// bad options and set-up failures.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.GOMAXPROCS > 0 {
		// Set now; the deferred call restores the previous value.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.GOMAXPROCS))
	}
	rep := newReport(o, runtime.GOMAXPROCS(0))
	env, err := setUp(ctx, o, rep)
	defer env.close()
	if err != nil {
		return nil, err
	}
	paths := env.paths
	for _, p := range paths {
		if err := probe(ctx, p, o.BodyBytes); err != nil {
			if ctx.Err() != nil {
				rep.Interrupted = true
				rep.finish(paths)
				return rep, nil
			}
			return nil, fmt.Errorf("%s path (%s) does not echo: %w", p.name, p.url, err)
		}
	}
	if o.Warmup > 0 {
		logf(o.Log, "warm-up: %v on each path", o.Warmup)
		for _, p := range paths {
			if _, err := load(ctx, o, p, int(o.Warmup/time.Second), o.Seed^0x5eed, false); err != nil {
				return nil, err
			}
		}
	}
	rounds := int(o.Duration / o.Round)
	seconds := int(o.Round / time.Second)
	for i := 0; i < rounds && ctx.Err() == nil; i++ {
		// Rotating who goes first spreads any drift within a round (a
		// neighbour's burst, a GC) over every path alike.
		for j := range paths {
			p := paths[(i+j)%len(paths)]
			// Every child is counted in every turn, so the idle ones'
			// background work (timers, pollers) weighs on all paths alike.
			cpu0 := cpuUsed(env.pids()...)
			res, err := load(ctx, o, p, seconds, o.Seed+uint64(i), true)
			if err != nil {
				return nil, err
			}
			p.cpu += cpuUsed(env.pids()...) - cpu0
			rep.Rounds = append(rep.Rounds, RoundRow{Round: i + 1, Position: j + 1, Path: p.name,
				Requests: res.Requests, Errors: res.Errors, P50us: us(res.P50), P99us: us(res.P99), MaxUs: us(res.Max)})
			if ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() == nil {
			logf(o.Log, "round %d/%d done", i+1, rounds)
		}
	}
	rep.Interrupted = ctx.Err() != nil
	rep.finish(paths)
	return rep, nil
}

// env is everything Run starts; close stops it in reverse.
type env struct {
	instance, provider *server
	gantry             *gateway.Server
	gantryChild        *child
	openfaas           *child
	paths              []*path
}

func setUp(ctx context.Context, o Options, rep *Report) (*env, error) {
	e := &env{}
	var err error
	if e.instance, err = listen(echo); err != nil {
		return e, fmt.Errorf("instance: %w", err)
	}
	if e.gantry, err = startGantry(ctx, e.instance.addr()); err != nil {
		return e, fmt.Errorf("gantry gateway: %w", err)
	}
	nonce := newNonce()
	if e.provider, err = listen(NewProvider(FunctionName, e.instance.addr(), nonce)); err != nil {
		return e, fmt.Errorf("provider: %w", err)
	}
	logf(o.Log, "instance %s, in-process Gantry gateway %s, provider %s", e.instance.addr(), e.gantry.Addr(), e.provider.addr())
	e.paths = []*path{newPath(PathDirect, "load generator -> instance", e.instance.url()+"/", o)}

	child, note, err := startGantryChild(ctx, o, e.instance.addr(), rep.GOMAXPROCS)
	if err != nil {
		return e, err
	}
	if child != nil {
		e.gantryChild = child
		logf(o.Log, "Gantry gateway process %s (pid %d)", child.url, child.cmd.Process.Pid)
		e.paths = append(e.paths, newPath(PathGantry, "load generator -> Gantry gateway (own process) -> instance",
			child.url+"/function/"+FunctionName, o))
	} else {
		rep.Notes = append(rep.Notes, note)
		logf(o.Log, "%s", note)
	}
	e.paths = append(e.paths,
		newPath(PathGantryInproc, "load generator -> Gantry gateway (in the benchmark's process) -> instance",
			e.gantry.URL()+"/function/"+FunctionName, o),
		newPath(PathProvider, "load generator -> provider -> instance", e.provider.url()+"/function/"+FunctionName, o))

	rep.OpenFaaS.Binary = o.OpenFaaS
	child, note, err = startOpenFaaS(ctx, o, e.provider.url(), nonce, rep.GOMAXPROCS)
	if err != nil {
		return e, err
	}
	if child == nil {
		rep.OpenFaaS.Note = note
		rep.Notes = append(rep.Notes, note)
		logf(o.Log, "%s", note)
		return e, nil
	}
	e.openfaas = child
	rep.OpenFaaS.Measured = true
	rep.OpenFaaS.URL = child.url
	if !child.rmLog {
		rep.OpenFaaS.Log = child.log.Name()
	}
	logf(o.Log, "OpenFaaS gateway %s (pid %d) forwards to the provider", child.url, child.cmd.Process.Pid)
	e.paths = append(e.paths, newPath(PathOpenFaaS, "load generator -> OpenFaaS gateway (own process) -> provider -> instance",
		child.url+"/function/"+FunctionName, o))
	return e, nil
}

// startGantry runs Gantry's gateway, unchanged, over a Static backend for
// the instance, on a free loopback port.
func startGantry(ctx context.Context, instanceAddr string) (*gateway.Server, error) {
	return gateway.Start(ctx, gateway.ServerConfig{
		Addr:     "127.0.0.1:0",
		Stack:    &stack.Stack{Functions: []stack.Function{benchFunction(FunctionName)}},
		Backend:  NewStatic(instanceAddr),
		Dispatch: dispatch.Config{},
		Gateway:  gateway.Config{},
	})
}

// ServeGantry is the child side of the gantry path: it runs Gantry's
// gateway over a Static backend for the instance at instanceAddr, writes
// the gateway's URL and a newline to w, and serves until ctx ends.
func ServeGantry(ctx context.Context, instanceAddr string, w io.Writer) error {
	srv, err := startGantry(ctx, instanceAddr)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, srv.URL()); err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return srv.Shutdown(sctx)
}

// pids are the gateway children's process IDs.
func (e *env) pids() []int {
	var out []int
	for _, c := range []*child{e.gantryChild, e.openfaas} {
		if c != nil {
			out = append(out, c.cmd.Process.Pid)
		}
	}
	return out
}

func (e *env) close() {
	e.openfaas.stop()
	e.gantryChild.stop()
	if e.gantry != nil {
		// The static backend has nothing to drain; keep the stop prompt.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_ = e.gantry.Shutdown(ctx)
		cancel()
	}
	if e.provider != nil {
		e.provider.close()
	}
	if e.instance != nil {
		e.instance.close()
	}
	for _, p := range e.paths {
		p.client.CloseIdleConnections()
	}
}

func newPath(name, via, url string, o Options) *path {
	h := hdrhistogram.New(1, histMaxNs, 3)
	// One client per path for the whole run, so its warm connections
	// carry over from round to round.
	return &path{name: name, via: via, url: url, client: loadgen.NewClient(o.MaxInFlight), hist: h, errs: map[string]int64{}}
}

// load sends seconds of open-loop Poisson arrivals at o.Rate to p. With
// record, every outcome goes into p's totals and histogram.
func load(ctx context.Context, o Options, p *path, seconds int, seed uint64, record bool) (*loadgen.Result, error) {
	perSecond := make([]float64, seconds)
	for i := range perSecond {
		perSecond[i] = o.Rate
	}
	cfg := loadgen.Config{
		URL: p.url, Method: http.MethodPost,
		Trace:   trace.Trace{Name: "constant", PerSecond: perSecond},
		MinSize: float64(o.BodyBytes), MaxSize: float64(o.BodyBytes), Payload: loadgen.Zeros(1),
		Seed: seed, MaxInFlight: o.MaxInFlight, Timeout: requestTimeout, Drain: drain,
		SLO: time.Second, Client: p.client,
	}
	if record {
		cfg.OnSample = func(s loadgen.Sample) {
			p.requests++
			if s.Kind == loadgen.KindOK {
				p.ok++
			} else {
				p.errs[s.Kind]++
			}
			if s.Measured {
				_ = p.hist.RecordValue(min(max(int64(s.Latency), 1), histMaxNs))
			}
		}
	}
	return loadgen.Run(ctx, cfg)
}

// probe sends one request and checks that the body comes back: a path
// that answers but does not reach the instance must not be measured.
func probe(ctx context.Context, p *path, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	want := bytes.Repeat([]byte("g"), n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(want))
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, int64(n)+1024))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
		return fmt.Errorf("HTTP %d with %d bytes (%q), want 200 with the %d bytes sent", resp.StatusCode, len(got), truncate(string(got), 80), n)
	}
	return nil
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "gantry-bench-" + hex.EncodeToString(b)
}

// loadAvg reads the 1, 5 and 15 minute load averages; zeros where the
// system has no /proc.
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i >= 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "bench gateway: "+format+"\n", args...)
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
