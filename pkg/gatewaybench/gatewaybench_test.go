package gatewaybench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/stack"
)

// fakeEnv makes the test binary act as a stand-in OpenFaaS gateway: it
// reads functions_provider_url and forwards every request to it, as the
// real gateway forwards /function/NAME and /healthz, on the ports the
// parent set in fakePortsEnv. It lets the OpenFaaS path be tested end to end
// without the real binary or ports 8080 and 8082.
const (
	fakeEnv      = "GATEWAYBENCH_FAKE_OPENFAAS"
	fakePortsEnv = "GATEWAYBENCH_FAKE_PORTS"
	// gantryEnv makes the test binary the Gantry gateway child, as the
	// hidden flag of `gantry bench gateway` makes the gantry binary.
	gantryEnv = "GATEWAYBENCH_GANTRY_CHILD"
	// sustainEnv makes the test binary a child of a Sustain run, as
	// `gantry bench gateway` with its hidden flags: the last arguments say
	// which.
	sustainEnv = "GATEWAYBENCH_SUSTAIN_CHILD"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(fakeEnv) == "1":
		runFakeOpenFaaS()
		return
	case os.Getenv(sustainEnv) == "1":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var err error
		if n := len(os.Args); os.Args[n-1] == "--"+ServeInstanceFlag {
			err = ServeInstance(ctx, os.Stdout)
		} else if n >= 2 && os.Args[n-2] == "--"+ServeGantryFlag {
			err = ServeGantry(ctx, os.Args[n-1], os.Stdout)
		} else {
			err = fmt.Errorf("arguments %q name no child", os.Args)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sustain child:", err)
			os.Exit(1)
		}
		return
	case os.Getenv(gantryEnv) == "1":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := ServeGantry(ctx, os.Args[len(os.Args)-1], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "gantry child:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// script writes an executable shell script that exports env and runs
// this test binary with the script's arguments: a child gets only the
// variables the benchmark gives it, so the test's switches travel here.
func script(t *testing.T, env string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "child")
	body := fmt.Sprintf("#!/bin/sh\nexport %s\nexec %q \"$@\"\n", env, exe)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func runFakeOpenFaaS() {
	u, err := url.Parse(os.Getenv("functions_provider_url"))
	if err != nil || u.Host == "" {
		fmt.Fprintln(os.Stderr, "fake openfaas: functions_provider_url missing")
		os.Exit(1)
	}
	if os.Getenv("basic_auth") != "false" || os.Getenv("GOMAXPROCS") == "" {
		fmt.Fprintln(os.Stderr, "fake openfaas: expected basic_auth=false and GOMAXPROCS in the environment")
		os.Exit(1)
	}
	var api, metrics int
	if _, err := fmt.Sscanf(os.Getenv(fakePortsEnv), "%d,%d", &api, &metrics); err != nil {
		fmt.Fprintln(os.Stderr, "fake openfaas: bad ports", err)
		os.Exit(1)
	}
	go func() { _ = http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", metrics), http.NotFoundHandler()) }()
	fmt.Println("fake OpenFaaS gateway forwarding to", u)
	err = http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", api), httputil.NewSingleHostReverseProxy(u))
	fmt.Fprintln(os.Stderr, "fake openfaas:", err)
	os.Exit(1)
}

// freePorts returns two ports free right now on every interface.
func freePorts(t *testing.T) [2]int {
	t.Helper()
	var out [2]int
	for i := range out {
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		out[i] = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	return out
}

// quick is a short run: the tests check behaviour, not speed.
func quick(openfaas string) Options {
	o := DefaultOptions()
	o.Rate, o.Duration, o.Warmup = 50, 2*time.Second, 0
	o.OpenFaaS = openfaas
	o.ReadyWait = 10 * time.Second
	return o
}

func pathNames(r *Report) []string {
	var out []string
	for _, p := range r.Paths {
		out = append(out, p.Path)
	}
	return out
}

func checkPaths(t *testing.T, r *Report, rounds int, want ...string) {
	t.Helper()
	if got := pathNames(r); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paths %v, want %v", got, want)
	}
	for _, p := range r.Paths {
		// A stall of the whole machine (others' builds) can cost a request
		// or two its connection; anything else is a broken path.
		if p.Requests == 0 || p.OK < p.Requests*9/10 || p.P50us <= 0 || p.P99us < p.P50us || p.MaxUs < p.P99us {
			t.Errorf("path %s: %+v", p.Path, p)
		}
		for kind := range p.ErrorsByKind {
			if kind != "timeout" && kind != "connection_reset" && kind != "connection_refused" {
				t.Errorf("path %s: errors %v", p.Path, p.ErrorsByKind)
			}
		}
	}
	if len(r.Rounds) != rounds*len(want) {
		t.Errorf("%d round rows, want %d", len(r.Rounds), rounds*len(want))
	}
	// Round 2 starts with the second path: the order rotates.
	if len(r.Rounds) > len(want) && r.Rounds[len(want)].Path != want[1] {
		t.Errorf("round 2 starts with %s, want %s", r.Rounds[len(want)].Path, want[1])
	}
}

func TestAbsentOpenFaaSBinarySkipsItsPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-gateway")
	r, err := Run(context.Background(), quick(missing))
	if err != nil {
		t.Fatal(err)
	}
	checkPaths(t, r, 2, PathDirect, PathGantryInproc, PathProvider)
	if r.OpenFaaS.Measured || !strings.Contains(r.OpenFaaS.Note, "no binary at "+missing) {
		t.Fatalf("openfaas %+v, want a note naming the missing binary", r.OpenFaaS)
	}
	if _, ok := r.HopByName(HopGantryInproc); !ok {
		t.Error("no in-process Gantry gateway hop")
	}
	if r.Targets[0].Hop != HopGantryInproc || !r.Targets[0].Measured {
		t.Errorf("p99 target %+v, want it checked on the in-process hop", r.Targets[0])
	}
	if _, ok := r.HopByName(HopOpenFaaS); ok {
		t.Error("an OpenFaaS hop without its path")
	}
	for _, tg := range r.Targets {
		if tg.Target != TargetGantryP99 && (tg.Measured || tg.Met) {
			t.Errorf("target %+v measured without the OpenFaaS path", tg)
		}
	}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "note: OpenFaaS gateway not measured") {
		t.Errorf("table without the skip note:\n%s", b.String())
	}
}

func TestFailingOpenFaaSBinarySkipsItsPath(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "gateway")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'listen tcp :8080: bind: address already in use' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := openfaasPorts
	openfaasPorts = freePorts(t)
	defer func() { openfaasPorts = old }()
	o := quick(fake)
	o.Duration = time.Second
	o.Gantry = []string{fake} // fails the same way
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkPaths(t, r, 1, PathDirect, PathGantryInproc, PathProvider)
	if r.OpenFaaS.Measured || !strings.Contains(r.OpenFaaS.Note, "exited before answering") ||
		!strings.Contains(r.OpenFaaS.Note, "address already in use") {
		t.Fatalf("note %q, want the exit and the log's end", r.OpenFaaS.Note)
	}
	if len(r.Notes) != 2 || !strings.Contains(r.Notes[0], "Gantry gateway process not measured: it exited before printing its URL") {
		t.Fatalf("notes %q, want the Gantry child's exit first", r.Notes)
	}
}

func TestBusyOpenFaaSPortSkipsItsPath(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	old := openfaasPorts
	openfaasPorts = [2]int{ln.Addr().(*net.TCPAddr).Port, freePorts(t)[0]}
	defer func() { openfaasPorts = old }()
	o := quick(script(t, fakeEnv+"=1"))
	o.Duration = time.Second
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.OpenFaaS.Measured || !strings.Contains(r.OpenFaaS.Note, fmt.Sprintf("port %d is in use", openfaasPorts[0])) {
		t.Fatalf("note %q, want the busy port", r.OpenFaaS.Note)
	}
}

// With a stand-in gateway on free ports the fourth path runs, the hops
// split it, and the child is gone afterwards.
func TestOpenFaaSPathWithStandInGateway(t *testing.T) {
	old := openfaasPorts
	openfaasPorts = freePorts(t)
	defer func() { openfaasPorts = old }()
	wrapper := script(t, fmt.Sprintf("%s=1 %s=%d,%d", fakeEnv, fakePortsEnv, openfaasPorts[0], openfaasPorts[1]))
	o := quick(wrapper)
	o.OpenFaaSLog = filepath.Join(t.TempDir(), "openfaas.log")
	o.Gantry = []string{script(t, gantryEnv+"=1")}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OpenFaaS.Measured {
		t.Fatalf("OpenFaaS path skipped: %s", r.OpenFaaS.Note)
	}
	checkPaths(t, r, 2, PathDirect, PathGantry, PathGantryInproc, PathProvider, PathOpenFaaS)
	for _, h := range []string{HopGantry, HopGantryInproc, HopProvider, HopOpenFaaS, HopOpenFaaSStack} {
		if _, ok := r.HopByName(h); !ok {
			t.Errorf("hop %q missing", h)
		}
	}
	for _, tg := range r.Targets {
		if !tg.Measured || tg.Hop != HopGantry {
			t.Errorf("target %+v: want it measured on the Gantry process's hop", tg)
		}
	}
	if len(r.Notes) != 0 {
		t.Errorf("notes %q", r.Notes)
	}
	for _, p := range r.Paths {
		if p.CPUPerRequestUs <= 0 {
			t.Errorf("path %s: no CPU counted", p.Path)
		}
	}
	if b, _ := os.ReadFile(o.OpenFaaSLog); !bytes.Contains(b, []byte("fake OpenFaaS gateway forwarding to")) {
		t.Errorf("child log %q", b)
	}
	// The child was killed: its port is free again.
	if note := checkPortFree(openfaasPorts[0]); note != "" {
		t.Errorf("after the run: %s", note)
	}
}

// A cancelled run stops within a second, kills the child and still
// returns what it measured.
func TestInterruptStopsPromptly(t *testing.T) {
	o := quick("")
	o.Duration, o.Round = 10*time.Second, 5*time.Second
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	r, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	// By design it stops within a second (200 ms drain, 500 ms shutdown);
	// the bound leaves room for a loaded machine and still proves the run,
	// which had 8.5 s to go, stopped early.
	if took := time.Since(start) - 1500*time.Millisecond; took > 4*time.Second {
		t.Errorf("stopped %v after the interrupt", took)
	}
	if !r.Interrupted {
		t.Error("not marked interrupted")
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]func(*Options){
		"zero rate":         func(o *Options) { o.Rate = 0 },
		"rate too high":     func(o *Options) { o.Rate = MaxRate + 1 },
		"short duration":    func(o *Options) { o.Duration = 500 * time.Millisecond },
		"long duration":     func(o *Options) { o.Duration = MaxDuration + time.Second },
		"fractional round":  func(o *Options) { o.Round = 1500 * time.Millisecond },
		"uneven rounds":     func(o *Options) { o.Duration, o.Round = 5*time.Second, 2*time.Second },
		"negative warm-up":  func(o *Options) { o.Warmup = -time.Second },
		"empty body":        func(o *Options) { o.BodyBytes = 0 },
		"no in-flight":      func(o *Options) { o.MaxInFlight = 0 },
		"negative procs":    func(o *Options) { o.GOMAXPROCS = -1 },
		"no ready wait":     func(o *Options) { o.ReadyWait = 0 },
		"round > duration":  func(o *Options) { o.Duration, o.Round = 2*time.Second, 4*time.Second },
		"huge body":         func(o *Options) { o.BodyBytes = MaxBodyBytes + 1 },
		"warm-up too long":  func(o *Options) { o.Warmup = 2 * MaxWarmup },
		"NaN rate":          func(o *Options) { o.Rate = nan() },
		"in-flight too big": func(o *Options) { o.MaxInFlight = MaxInFlight + 1 },
		"negative GOGC":     func(o *Options) { o.GOGC = -1 },
		"GOGC too big":      func(o *Options) { o.GOGC = MaxGOGC + 1 },
	}
	for name, mutate := range bad {
		o := DefaultOptions()
		mutate(&o)
		if err := o.Validate(); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: Validate() = %v, want ErrBadOptions", name, err)
		}
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: Run() = %v, want ErrBadOptions", name, err)
		}
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// Both gateway children get the same runtime settings, GOGC only when set.
func TestRuntimeEnvIsTheSameForBothGateways(t *testing.T) {
	if got := runtimeEnv(2, 0); len(got) != 1 || got[0] != "GOMAXPROCS=2" {
		t.Fatalf("runtimeEnv(2, 0) = %q", got)
	}
	want := []string{"GOMAXPROCS=2", "GOGC=400"}
	if got := runtimeEnv(2, 400); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("runtimeEnv(2, 400) = %q, want %q", got, want)
	}
	env := strings.Join(openfaasEnv("http://p", 2, 400), " ")
	if !strings.Contains(env, "GOMAXPROCS=2") || !strings.Contains(env, "GOGC=400") || !strings.Contains(env, "functions_provider_url=http://p") {
		t.Fatalf("OpenFaaS env %q", env)
	}
}

func nan() float64 { var z float64; return z / z }

// The JSON object has the fields the CLI documents, with the right types.
func TestJSONShape(t *testing.T) {
	r, err := Run(context.Background(), quick(""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"started_at", "rate_per_s", "duration_s", "round_s", "warmup_s", "seed", "body_bytes",
		"gomaxprocs", "num_cpu", "go_version", "load_avg_start", "load_avg_end", "interrupted", "notes", "openfaas", "paths", "hops", "targets"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if m["openfaas"].(map[string]any)["version"] != OpenFaaSVersion {
		t.Errorf("openfaas.version %v", m["openfaas"])
	}
	paths := m["paths"].([]any)
	if len(paths) != 3 {
		t.Fatalf("%d paths", len(paths))
	}
	for _, p := range paths {
		pm := p.(map[string]any)
		for _, k := range []string{"path", "via", "requests", "ok", "errors", "errors_by_kind", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "added_p50_us", "added_p99_us", "cpu_per_request_us"} {
			if _, ok := pm[k]; !ok {
				t.Errorf("path %v lacks %q", pm["path"], k)
			}
		}
	}
	for _, tg := range m["targets"].([]any) {
		for _, k := range []string{"target", "hop", "value_us", "limit_us", "met", "measured", "conclusive"} {
			if _, ok := tg.(map[string]any)[k]; !ok {
				t.Errorf("target %v lacks %q", tg, k)
			}
		}
	}
	for _, h := range m["hops"].([]any) {
		for _, k := range []string{"hop", "path", "base", "p50_us", "p99_us", "round_median_p50_us", "round_median_p99_us", "cpu_per_request_us"} {
			if _, ok := h.(map[string]any)[k]; !ok {
				t.Errorf("hop %v lacks %q", h, k)
			}
		}
	}
	if d := paths[0].(map[string]any); d["path"] != PathDirect || d["added_p99_us"].(float64) != 0 {
		t.Errorf("first path %v, want direct with nothing added", d)
	}
	dir := t.TempDir()
	if err := r.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{PathsCSV, RoundsCSV, PlotPNG, ReportMD, ReportJSON} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, PathsCSV))
	if lines := strings.Count(string(csv), "\n"); lines != 4 {
		t.Errorf("paths.csv has %d lines, want a header and 3 rows", lines)
	}
}

// The static backend under Gantry's unchanged gateway serves the instance:
// the body comes back through /function/NAME, and the dispatcher counts
// the instance as its one ready instance.
func TestStaticBackendServesInstanceThroughGantryGateway(t *testing.T) {
	inst, err := listen(echo)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close()
	srv, err := gateway.Start(context.Background(), gateway.ServerConfig{Addr: "127.0.0.1:0",
		Stack:   &stack.Stack{Functions: []stack.Function{benchFunction("echo")}},
		Backend: NewStatic(inst.addr()), Dispatch: dispatch.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()
	for i := range 20 {
		body := fmt.Sprintf("hello %d", i)
		resp, err := http.Post(srv.URL()+"/function/echo", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != body {
			t.Fatalf("HTTP %d %q, want 200 %q", resp.StatusCode, got, body)
		}
	}
	resp, err := http.Post(srv.URL()+"/function/nope", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown function: HTTP %d", resp.StatusCode)
	}
}

// A start for a function the backend was never given fails, as the
// Backend contract requires one Ready or Failed per start.
func TestStaticBackendFailsUnknownFunction(t *testing.T) {
	ev := &recorder{ch: make(chan string, 4)}
	b := NewStatic("127.0.0.1:1")
	b.Attach(ev)
	_ = b.Deploy(context.Background(), benchFunction("echo"))
	b.Start("echo", 2)
	b.Start("other", 1)
	got := map[string]int{}
	for range 3 {
		select {
		case e := <-ev.ch:
			got[e]++
		case <-time.After(5 * time.Second):
			t.Fatalf("events so far %v", got)
		}
	}
	if got["ready echo 127.0.0.1:1"] != 2 || got["failed other"] != 1 {
		t.Errorf("events %v", got)
	}
}

type recorder struct{ ch chan string }

func (r *recorder) Ready(inst backend.Instance) {
	r.ch <- fmt.Sprintf("ready %s %s", inst.Function, inst.Addr)
}
func (r *recorder) Failed(fn string, _ error)             { r.ch <- "failed " + fn }
func (r *recorder) Exited(inst backend.Instance, _ error) { r.ch <- "exited " + inst.ID }

func TestProviderForwardsAndLists(t *testing.T) {
	inst, err := listen(echo)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close()
	prov, err := listen(NewProvider("echo", inst.addr(), "n0nce"))
	if err != nil {
		t.Fatal(err)
	}
	defer prov.close()
	get := func(p string) (int, string) {
		resp, err := http.Get(prov.url() + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "n0nce" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	var fns []functionStatus
	if code, body := get("/system/functions"); code != 200 || json.Unmarshal([]byte(body), &fns) != nil ||
		len(fns) != 1 || fns[0].Name != "echo" || fns[0].AvailableReplicas != 1 {
		t.Errorf("/system/functions: %d %q", code, body)
	}
	if code, body := get("/system/namespaces"); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("/system/namespaces: %d %q", code, body)
	}
	if code, _ := get("/function/other"); code != http.StatusNotFound {
		t.Errorf("/function/other: %d", code)
	}
	resp, err := http.Post(prov.url()+"/function/echo/sub?x=1", "text/plain", strings.NewReader("ping"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ping" {
		t.Errorf("invoke: %d %q", resp.StatusCode, b)
	}
}

// OpenFaaSVersion is the version hack/openfaas/go.mod pins, which is what
// hack/build-openfaas.sh builds and where DefaultOpenFaaSPath looks.
func TestOpenFaaSVersionMatchesWrapperModule(t *testing.T) {
	b, err := os.ReadFile("../../hack/openfaas/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require github\.com/openfaas/faas/gateway (\S+)$`).FindSubmatch(b)
	if m == nil || string(m[1]) != OpenFaaSVersion {
		t.Fatalf("hack/openfaas/go.mod pins %q, OpenFaaSVersion is %q", m, OpenFaaSVersion)
	}
	t.Setenv("GANTRY_CACHE", "/cache")
	if got, want := DefaultOpenFaaSPath(), "/cache/openfaas/"+OpenFaaSVersion+"/gateway"; got != want {
		t.Errorf("DefaultOpenFaaSPath() = %q, want %q", got, want)
	}
}

// Targets compare the Gantry process's hop when it ran, and a hop that came
// out <= 0 (noise) makes a target inconclusive, never met.
func TestTargets(t *testing.T) {
	r := &Report{Hops: []Hop{
		{Hop: HopGantry, P50us: 100, P99us: 900},
		{Hop: HopGantryInproc, P50us: 50, P99us: 2000},
		{Hop: HopOpenFaaS, P50us: 300, P99us: 1500},
	}}
	r.addTargets()
	want := []bool{true, true, false} // 900 < 1000; 100 < 150; 900 >= 750
	for i, tg := range r.Targets {
		if tg.Hop != HopGantry || !tg.Conclusive || tg.Met != want[i] {
			t.Errorf("target %+v, want met=%v on %s", tg, want[i], HopGantry)
		}
	}
	r = &Report{Hops: []Hop{{Hop: HopGantryInproc, P50us: -20, P99us: 400}, {Hop: HopOpenFaaS, P50us: 300, P99us: -5}}}
	r.addTargets()
	if tg := r.Targets[0]; tg.Hop != HopGantryInproc || !tg.Met {
		t.Errorf("p99 target %+v, want met on the in-process hop", tg)
	}
	for _, tg := range r.Targets[1:] {
		if tg.Conclusive || tg.Met || !strings.Contains(tg.verdict(), "inconclusive") {
			t.Errorf("target %+v (%s), want inconclusive", tg, tg.verdict())
		}
	}
	r = &Report{Hops: []Hop{{Hop: HopGantry, P50us: 100, P99us: 900}}}
	r.addTargets()
	if tg := r.Targets[1]; tg.Measured || tg.verdict() != "not measured" {
		t.Errorf("without OpenFaaS: %+v", tg)
	}
}

// procCPU reads a child's CPU time from /proc, in USER_HZ ticks.
func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Spin until this process has used a few ticks of CPU.
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for procCPU(os.Getpid()) < 3*clockTick && time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
	}
	if got := procCPU(os.Getpid()); got < 3*clockTick {
		t.Fatalf("procCPU(self) = %v after spinning (x=%d)", got, x)
	}
	if procCPU(1<<30) != 0 {
		t.Error("a process that does not exist used CPU")
	}
	if cpuUsed() <= 0 {
		t.Error("cpuUsed() = 0 for this process")
	}
}
