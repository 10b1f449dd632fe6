package gatewaybench

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/trace"
)

// The hidden flags of `gantry bench gateway` that make it a child of a
// run: Gantry's gateway for an instance's address, or the echo instance.
const (
	ServeGantryFlag   = "serve-gantry-for"
	ServeInstanceFlag = "serve-instance"
)

// Sustained throughput: tiny requests at a high rate through Gantry's
// gateway for a while, with the load generator, the gateway and the
// function instance in three processes, so that each one's CPU is its own
// and the gateway's memory can be watched over time.

// SustainOptions configures Sustain. DefaultSustainOptions gives the
// defaults; Validate checks bounds.
type SustainOptions struct {
	// Rate is the offered rate (Poisson arrivals).
	Rate float64
	// Duration is the measured load, whole seconds.
	Duration time.Duration
	// Warmup is unmeasured load first, whole seconds.
	Warmup time.Duration
	// BodyBytes is each request's body; the instance echoes it.
	BodyBytes int
	// MaxInFlight bounds the generator's concurrent requests; arrivals
	// past it are counted as client_overload, never dropped.
	MaxInFlight int
	// GOMAXPROCS, when positive, is set for this process and passed to
	// both children; 0 passes this process's on.
	GOMAXPROCS int
	Seed       uint64
	// Command runs this binary's `bench gateway`: the children are it with
	// --serve-gantry-for ADDR (the gateway) and --serve-instance (the
	// echo instance).
	Command []string
	// ReadyWait bounds each child's start.
	ReadyWait time.Duration
	Log       io.Writer
}

// DefaultSustainOptions: 5000 requests/s of 64-byte bodies for 30 s after
// 2 s of warm-up.
func DefaultSustainOptions() SustainOptions {
	return SustainOptions{Rate: 5000, Duration: 30 * time.Second, Warmup: 2 * time.Second, BodyBytes: 64,
		MaxInFlight: 2000, Seed: 1, ReadyWait: 15 * time.Second}
}

// Validate reports whether Sustain would accept o; errors wrap ErrBadOptions.
func (o SustainOptions) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadOptions, fmt.Sprintf(format, args...))
	}
	if err := validateLoad(o.Rate, o.Warmup, o.BodyBytes, o.MaxInFlight, o.GOMAXPROCS, o.ReadyWait); err != nil {
		return err
	}
	switch {
	case o.Duration < time.Second || o.Duration > MaxDuration || o.Duration%time.Second != 0:
		return bad("duration must be whole seconds in [1s, %v], got %v", MaxDuration, o.Duration)
	case len(o.Command) == 0:
		return bad("no command to run the gateway and instance processes")
	}
	return nil
}

// SustainSecond is one second of the measured load.
type SustainSecond struct {
	Second    int   `json:"second"`
	Completed int64 `json:"completed"`
	Errors    int64 `json:"errors"`
	// GatewayHeapMiB is the gateway's heap in use (its /metrics,
	// go_memstats_heap_inuse_bytes); GatewayRSSMiB its resident memory.
	GatewayHeapMiB float64 `json:"gateway_heap_mib"`
	GatewayRSSMiB  float64 `json:"gateway_rss_mib"`
	// GatewayGoroutines is the gateway's go_goroutines: about one per
	// open client connection, so memory that follows it follows the
	// connections the generator holds open, not a leak.
	GatewayGoroutines float64 `json:"gateway_goroutines"`
	// Cores used in this second by each process.
	GeneratorCores float64 `json:"generator_cores"`
	GatewayCores   float64 `json:"gateway_cores"`
	InstanceCores  float64 `json:"instance_cores"`
}

// ProcessCPU is one process's CPU over the measured load.
type ProcessCPU struct {
	Process string  `json:"process"`
	Seconds float64 `json:"cpu_seconds"`
	// Cores is CPU seconds per second of load; Share its part of all
	// three; PerRequestUs per completed request.
	Cores        float64 `json:"cores"`
	Share        float64 `json:"share"`
	PerRequestUs float64 `json:"us_per_request"`
}

// SustainReport is what Sustain measured.
type SustainReport struct {
	Rate         float64          `json:"rate"`
	Seconds      int              `json:"seconds"`
	GOMAXPROCS   int              `json:"gomaxprocs"`
	CPUs         int              `json:"cpus"`
	Offered      int64            `json:"offered"`
	Completed    int64            `json:"completed"`
	CompletedRPS float64          `json:"completed_rps"`
	Errors       map[string]int64 `json:"errors"`
	P50us        float64          `json:"p50_us"`
	P99us        float64          `json:"p99_us"`
	MaxUs        float64          `json:"max_us"`
	CPU          []ProcessCPU     `json:"cpu"`
	// HeapFirstMiB and HeapLastMiB are the gateway's mean heap in use over
	// the first and the last fifth of the run; HeapMaxMiB the highest.
	HeapFirstMiB float64         `json:"heap_first_mib"`
	HeapLastMiB  float64         `json:"heap_last_mib"`
	HeapMaxMiB   float64         `json:"heap_max_mib"`
	RSSFirstMiB  float64         `json:"rss_first_mib"`
	RSSLastMiB   float64         `json:"rss_last_mib"`
	Timeline     []SustainSecond `json:"timeline"`
	LoadBefore   [3]float64      `json:"load_before"`
	LoadAfter    [3]float64      `json:"load_after"`
	Interrupted  bool            `json:"interrupted"`
	Notes        []string        `json:"notes,omitempty"`
}

// Sustain starts the echo instance and Gantry's gateway as children, sends
// o.Rate requests/s through the gateway from this process, and samples
// every second what completed, each process's CPU and the gateway's memory.
func Sustain(ctx context.Context, o SustainOptions) (*SustainReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.GOMAXPROCS > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.GOMAXPROCS))
	}
	procs := runtime.GOMAXPROCS(0)
	rep := &SustainReport{Rate: o.Rate, Seconds: int(o.Duration / time.Second), GOMAXPROCS: procs,
		CPUs: runtime.NumCPU(), Errors: map[string]int64{}, LoadBefore: loadAvg()}
	inst, err := startURLChild(ctx, append(append([]string{}, o.Command...), "--"+ServeInstanceFlag), procs, o.ReadyWait)
	if err != nil {
		return nil, fmt.Errorf("instance process: %w", err)
	}
	defer inst.stop()
	gw, note, err := startGantryChild(ctx, Options{Gantry: append(append([]string{}, o.Command...), "--"+ServeGantryFlag),
		ReadyWait: o.ReadyWait}, strings.TrimPrefix(inst.url, "http://"), procs)
	if err != nil {
		return nil, err
	}
	if gw == nil {
		return nil, fmt.Errorf("gateway process: %s", note)
	}
	defer gw.stop()
	logf(o.Log, "instance pid %d at %s, gateway pid %d at %s; this process (pid %d) generates the load",
		inst.cmd.Process.Pid, inst.url, gw.cmd.Process.Pid, gw.url, os.Getpid())
	url := gw.url + "/function/" + FunctionName
	client := loadgen.NewClient(o.MaxInFlight)
	defer client.CloseIdleConnections()
	p := &path{name: PathGantry, url: url, client: client}
	if err := probe(ctx, p, o.BodyBytes); err != nil {
		return nil, fmt.Errorf("the gateway does not echo: %w", err)
	}
	if o.Warmup > 0 {
		logf(o.Log, "warm-up: %v at %v requests/s", o.Warmup, o.Rate)
		if _, err := sustainLoad(ctx, o, url, client, int(o.Warmup/time.Second), o.Seed^0x5eed, nil); err != nil {
			return nil, err
		}
	}
	hist := hdrhistogram.New(1, histMaxNs, 3)
	var completed, failed atomic.Int64
	var mu sync.Mutex // guards hist and rep.Errors
	onSample := func(s loadgen.Sample) {
		if s.Kind == loadgen.KindOK {
			completed.Add(1)
		} else {
			failed.Add(1)
		}
		mu.Lock()
		defer mu.Unlock()
		if s.Kind != loadgen.KindOK {
			rep.Errors[s.Kind]++
		}
		if s.Measured && s.Kind == loadgen.KindOK {
			_ = hist.RecordValue(min(max(int64(s.Latency), 1), histMaxNs))
		}
	}
	sampler := newSampler(gw, inst, &completed, &failed)
	stopSampling := sampler.start(o.Log)
	res, err := sustainLoad(ctx, o, url, client, rep.Seconds, o.Seed, onSample)
	stopSampling()
	if err != nil {
		return nil, err
	}
	rep.LoadAfter = loadAvg()
	rep.Interrupted = ctx.Err() != nil
	rep.Offered = res.Requests
	rep.Completed = completed.Load()
	wall := res.Duration.Seconds()
	if wall > 0 {
		rep.CompletedRPS = float64(rep.Completed) / wall
	}
	mu.Lock()
	rep.P50us, rep.P99us, rep.MaxUs = us(time.Duration(hist.ValueAtQuantile(50))), us(time.Duration(hist.ValueAtQuantile(99))), us(time.Duration(hist.Max()))
	mu.Unlock()
	rep.Timeline = sampler.seconds
	rep.summarise(sampler, wall)
	return rep, nil
}

func sustainLoad(ctx context.Context, o SustainOptions, url string, client *http.Client, seconds int, seed uint64, onSample func(loadgen.Sample)) (*loadgen.Result, error) {
	perSecond := make([]float64, seconds)
	for i := range perSecond {
		perSecond[i] = o.Rate
	}
	return loadgen.Run(ctx, loadgen.Config{URL: url, Method: http.MethodPost,
		Trace:   trace.Trace{Name: "constant", PerSecond: perSecond},
		MinSize: float64(o.BodyBytes), MaxSize: float64(o.BodyBytes), Payload: loadgen.Zeros(1),
		Seed: seed, MaxInFlight: o.MaxInFlight, Timeout: requestTimeout, Drain: drain,
		SLO: time.Second, Client: client, OnSample: onSample})
}

// sampler reads, every second, what completed and each process's CPU and
// the gateway's memory.
type sampler struct {
	gw, inst          *child
	completed, failed *atomic.Int64
	scrape            *http.Client
	seconds           []SustainSecond
	// CPU at the start and the end of the measured load.
	cpu0, cpu1 [3]time.Duration
}

// scrapeTimeout bounds one read of the gateway's /metrics: a busy machine
// (the gateway under -race on two shared cores) answers it in more than
// half a second at times, and a second without it lacks the heap.
const scrapeTimeout = 2 * time.Second

func newSampler(gw, inst *child, completed, failed *atomic.Int64) *sampler {
	return &sampler{gw: gw, inst: inst, completed: completed, failed: failed,
		scrape: &http.Client{Timeout: scrapeTimeout}}
}

// cpu is this process's, the gateway's and the instance's CPU so far.
func (s *sampler) cpu() [3]time.Duration {
	return [3]time.Duration{cpuUsed(), procCPU(s.gw.cmd.Process.Pid), procCPU(s.inst.cmd.Process.Pid)}
}

func (s *sampler) start(log io.Writer) (stop func()) {
	s.cpu0 = s.cpu()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		prev, prevAt := s.cpu0, time.Now()
		var prevOK, prevErr int64
		for i := 1; ; i++ {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			now, at := s.cpu(), time.Now()
			dt := at.Sub(prevAt).Seconds()
			ok, bad := s.completed.Load(), s.failed.Load()
			heap, goroutines := s.scrapeGateway()
			sec := SustainSecond{Second: i, Completed: ok - prevOK, Errors: bad - prevErr,
				GatewayHeapMiB: heap, GatewayRSSMiB: rssMiB(s.gw.cmd.Process.Pid), GatewayGoroutines: goroutines,
				GeneratorCores: (now[0] - prev[0]).Seconds() / dt, GatewayCores: (now[1] - prev[1]).Seconds() / dt,
				InstanceCores: (now[2] - prev[2]).Seconds() / dt}
			s.seconds = append(s.seconds, sec)
			logf(log, "%3d s: %5d completed, %d errors; gateway heap %.1f MiB, RSS %.1f MiB, %.0f goroutines; cores: generator %.2f, gateway %.2f, instance %.2f",
				i, sec.Completed, sec.Errors, sec.GatewayHeapMiB, sec.GatewayRSSMiB, sec.GatewayGoroutines, sec.GeneratorCores, sec.GatewayCores, sec.InstanceCores)
			prev, prevAt, prevOK, prevErr = now, at, ok, bad
		}
	}()
	return func() {
		close(quit)
		<-done
		s.cpu1 = s.cpu()
	}
}

// scrapeGateway reads the gateway's heap in use (MiB) and goroutines
// from its /metrics; -1 for what it cannot read.
func (s *sampler) scrapeGateway() (heapMiB, goroutines float64) {
	heapMiB, goroutines = -1, -1
	resp, err := s.scrape.Get(s.gw.url + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || (name != "go_memstats_heap_inuse_bytes" && name != "go_goroutines") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		if name == "go_goroutines" {
			goroutines = f
		} else {
			heapMiB = f / (1 << 20)
		}
	}
	return
}

// rssMiB reads a process's resident set from /proc; -1 when it cannot.
func rssMiB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseFloat(f[0], 64)
				if err == nil {
					return kb / 1024
				}
			}
		}
	}
	return -1
}

func (r *SustainReport) summarise(s *sampler, wall float64) {
	names := [3]string{"generator (this process)", "gateway", "instance"}
	var total time.Duration
	for i := range names {
		total += s.cpu1[i] - s.cpu0[i]
	}
	for i, n := range names {
		d := s.cpu1[i] - s.cpu0[i]
		pc := ProcessCPU{Process: n, Seconds: d.Seconds()}
		if wall > 0 {
			pc.Cores = d.Seconds() / wall
		}
		if total > 0 {
			pc.Share = float64(d) / float64(total)
		}
		if r.Completed > 0 {
			pc.PerRequestUs = us(d) / float64(r.Completed)
		}
		r.CPU = append(r.CPU, pc)
	}
	n := len(r.Timeline)
	if n == 0 {
		return
	}
	k := max(1, n/5)
	mean := func(xs []SustainSecond, f func(SustainSecond) float64) float64 {
		var sum float64
		for _, x := range xs {
			sum += f(x)
		}
		return sum / float64(len(xs))
	}
	heap := func(x SustainSecond) float64 { return x.GatewayHeapMiB }
	rss := func(x SustainSecond) float64 { return x.GatewayRSSMiB }
	r.HeapFirstMiB, r.HeapLastMiB = mean(r.Timeline[:k], heap), mean(r.Timeline[n-k:], heap)
	r.RSSFirstMiB, r.RSSLastMiB = mean(r.Timeline[:k], rss), mean(r.Timeline[n-k:], rss)
	for _, x := range r.Timeline {
		r.HeapMaxMiB = max(r.HeapMaxMiB, x.GatewayHeapMiB)
	}
}

// WriteTable prints the summary and the per-process CPU.
func (r *SustainReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "offered\t%.0f requests/s for %d s (%d requests), GOMAXPROCS %d on %d CPUs\n", r.Rate, r.Seconds, r.Offered, r.GOMAXPROCS, r.CPUs)
	fmt.Fprintf(tw, "completed\t%d (%.0f requests/s)\n", r.Completed, r.CompletedRPS)
	fmt.Fprintf(tw, "errors\t%v\n", r.Errors)
	fmt.Fprintf(tw, "latency of completed\tp50 %.0f µs, p99 %.0f µs, max %.0f µs\n", r.P50us, r.P99us, r.MaxUs)
	fmt.Fprintf(tw, "gateway heap in use\tfirst fifth %.1f MiB, last fifth %.1f MiB, highest %.1f MiB\n", r.HeapFirstMiB, r.HeapLastMiB, r.HeapMaxMiB)
	fmt.Fprintf(tw, "gateway RSS\tfirst fifth %.1f MiB, last fifth %.1f MiB\n", r.RSSFirstMiB, r.RSSLastMiB)
	fmt.Fprintf(tw, "load average\t%.2f before, %.2f after\n", r.LoadBefore[0], r.LoadAfter[0])
	fmt.Fprintln(tw, "\nprocess\tCPU s\tcores\tshare\tµs/request")
	for _, c := range r.CPU {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.0f%%\t%.0f\n", c.Process, c.Seconds, c.Cores, 100*c.Share, c.PerRequestUs)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	return tw.Flush()
}

// WriteDir writes report.json and timeline.csv into dir.
func (r *SustainReport) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "timeline.csv"))
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"second", "completed", "errors", "gateway_heap_mib", "gateway_rss_mib", "gateway_goroutines", "generator_cores", "gateway_cores", "instance_cores"})
	for _, s := range r.Timeline {
		_ = cw.Write([]string{strconv.Itoa(s.Second), strconv.FormatInt(s.Completed, 10), strconv.FormatInt(s.Errors, 10),
			f3(s.GatewayHeapMiB), f3(s.GatewayRSSMiB), f3(s.GatewayGoroutines), f3(s.GeneratorCores), f3(s.GatewayCores), f3(s.InstanceCores)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ServeInstance is the child side of the instance process: it serves the
// echo function on a free loopback port, writes its URL and a newline to
// w, and serves until ctx ends.
func ServeInstance(ctx context.Context, w io.Writer) error {
	s, err := listen(echo)
	if err != nil {
		return err
	}
	defer s.close()
	if _, err := fmt.Fprintln(w, s.url()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// startURLChild runs argv, which prints its URL first, with only
// GOMAXPROCS in its environment, and waits for the URL.
func startURLChild(ctx context.Context, argv []string, gomaxprocs int, wait time.Duration) (*child, error) {
	c, err := startChild(ctx, argv, []string{"GOMAXPROCS=" + strconv.Itoa(gomaxprocs)}, "", true)
	if err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(c.stdout)
		if s.Scan() {
			line <- s.Text()
		}
		_, _ = io.Copy(io.Discard, c.stdout)
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case u := <-line:
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			c.stop()
			return nil, fmt.Errorf("it printed %q, want its URL", truncate(u, 80))
		}
		c.url = u
		return c, nil
	case <-c.exited:
		err := fmt.Errorf("it exited before printing its URL (%v); its log ends: %s", c.err, c.logTail())
		c.stop()
		return nil, err
	case <-timer.C:
		c.stop()
		return nil, fmt.Errorf("no URL within %v", wait)
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
}

func f3(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
