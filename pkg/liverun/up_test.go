package liverun

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/examples"
	"gantry.dev/gantry/pkg/childproc"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/workload"
)

// The instance counts come from the gateway's own series: ready and
// starting replicas, and instances started, summed over functions.
func TestParseCountsSumsTheGatewaysInstanceSeries(t *testing.T) {
	text := `# HELP gantry_function_replicas Instances of a function, by state.
gantry_function_replicas{function_name="a",state="ready"} 3
gantry_function_replicas{function_name="a",state="starting"} 1
gantry_function_replicas{function_name="b",state="ready"} 2
gantry_function_instances_started_total{function_name="a"} 7
gantry_function_instances_started_total{function_name="b"} 4
gantry_function_queued{function_name="a"} 9
go_goroutines 40
`
	c, err := parseCounts(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if c.live != 6 || c.started != 11 {
		t.Errorf("got live %d started %d, want 6 and 11", c.live, c.started)
	}
	if _, err := parseCounts(strings.NewReader("gantry_function_replicas{x=\"y\"} nope\n")); err == nil {
		t.Error("a malformed value was accepted")
	}
}

func TestLogFieldReadsSlogTextValues(t *testing.T) {
	line := `time=2026-12-01T19:00:00Z level=INFO msg="gateway listening" url=http://127.0.0.1:40123 policy=gantry functions=3`
	if got := logField(line, "url"); got != "http://127.0.0.1:40123" {
		t.Errorf("url = %q", got)
	}
	if got := logField(line, "msg"); got != "gateway listening" {
		t.Errorf("msg = %q", got)
	}
	if got := logField(line, "absent"); got != "" {
		t.Errorf("absent = %q", got)
	}
}

// The verdict names the policy that held the SLO with the fewest
// instances, and only a policy at 99.9% or better with no error holds it.
func TestVerdictPicksTheFewestInstancesAmongThoseHoldingTheSLO(t *testing.T) {
	runs := []PolicyRun{
		{Policy: "gantry", Requests: 1000, SLOCompliance: 0.9995, AvgContainers: 5.5},
		{Policy: "cypress", Requests: 1000, SLOCompliance: 0.9990, AvgContainers: 4.0, Errors: 1},
		{Policy: "atoll", Requests: 1000, SLOCompliance: 1, AvgContainers: 9},
		{Policy: "knative", Requests: 1000, SLOCompliance: 0.98, AvgContainers: 3},
	}
	v := verdict(runs, 800)
	if !strings.HasPrefix(v, "gantry held the SLO") || !strings.Contains(v, "atoll 9.0") ||
		!strings.Contains(v, "missed it: cypress, knative") {
		t.Errorf("verdict %q", v)
	}
	none := verdict(runs[1:2], 800)
	if !strings.HasPrefix(none, "no policy held the SLO") || !strings.Contains(none, "closest: cypress, 99.90% with 1 errors") {
		t.Errorf("verdict %q", none)
	}
}

// A generated stack file parses back to the declarations it was written
// from, so each child gateway serves exactly the replay stack.
func TestMarshalStackRoundTrips(t *testing.T) {
	model, err := workload.Lookup("audio-translation")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReplayStack(model, 1600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want.Functions[0].Criticality = 7
	data, err := marshalStack(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := stack.Parse("generated", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(got.Functions) != len(want.Functions) || len(got.Apps) != 1 {
		t.Fatalf("got %d functions, %d apps", len(got.Functions), len(got.Apps))
	}
	byName := map[string]stack.Function{}
	for _, f := range got.Functions {
		byName[f.Name] = f
	}
	for _, w := range want.Functions {
		g := byName[w.Name]
		if g.Command != w.Command || g.SLO != w.SLO || g.Criticality != w.Criticality || g.MaxScale != w.MaxScale ||
			g.MinSize != w.MinSize || g.MaxSize != w.MaxSize || g.SizeSensitive != w.SizeSensitive ||
			g.ColdStart != w.ColdStart || g.SizeHeader != w.SizeHeader || g.Concurrency != w.Concurrency {
			t.Errorf("%s: got %+v, want %+v", w.Name, g, w)
		}
	}
	if got.Apps[0].SLO != want.Apps[0].SLO || strings.Join(got.Apps[0].Functions, ",") != strings.Join(want.Apps[0].Functions, ",") {
		t.Errorf("app: got %+v, want %+v", got.Apps[0], want.Apps[0])
	}
}

// The real-functions run uses the example stack's own SLOs.
func TestUpStackOfRealFunctionsIsTheExampleStack(t *testing.T) {
	s, payload, err := upStack(UpConfig{Functions: FunctionsReal, App: "audio-translation"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := stack.Parse("examples/stack.yml", examples.Stack)
	if err != nil {
		t.Fatal(err)
	}
	app, err := stackApp(s, "audio-translation")
	if err != nil {
		t.Fatal(err)
	}
	if payload != "audio-translation" || len(s.Functions) != len(want.Functions) || app.SLO != 350*time.Millisecond {
		t.Errorf("payload %q, %d functions, app SLO %v", payload, len(s.Functions), app.SLO)
	}
}

// The replay functions' SLO is the factor times the app's largest
// execution time, and a factor is refused where it would be ignored.
func TestUpSLOFactorSetsTheReplaySLO(t *testing.T) {
	cfg := UpConfig{App: "sentiment-analysis", Exe: "gantry"}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	if cfg.SLOFactor != DefaultUpSLOFactor {
		t.Fatalf("default factor %v", cfg.SLOFactor)
	}
	cfg.SLOFactor = 2.5
	s, _, err := upStack(cfg)
	if err != nil {
		t.Fatal(err)
	}
	app, err := stackApp(s, cfg.App)
	if err != nil {
		t.Fatal(err)
	}
	model, _ := workload.Lookup(cfg.App)
	want := time.Duration(2.5 * float64(model.MaxExec())).Round(time.Millisecond)
	if app.SLO != want || s.Functions[0].SLO != want {
		t.Errorf("app SLO %v, function SLO %v, want %v (largest execution %v)", app.SLO, s.Functions[0].SLO, want, model.MaxExec())
	}
	for _, bad := range []UpConfig{
		{Functions: FunctionsReal, SLOFactor: 2},
		{SLOFactor: 0.9},
		{SLOFactor: MaxSLOFactor + 1},
	} {
		bad.App, bad.Exe = "sentiment-analysis", "gantry"
		if err := bad.defaults(); err != nil {
			t.Fatal(err)
		}
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// An interrupted run does not wait for a gateway that is slow to stop (a
// loaded machine, many instances): past hurriedStopTimeout it is killed,
// where an orderly stop would wait up to gatewayStopTimeout.
func TestHurriedStopKillsAGatewayThatDoesNotStop(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `trap "" TERM; echo ready; while :; do sleep 0.1; done`)
	cmd.SysProcAttr = childproc.Attr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	// The trap is set once the shell has printed.
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProc{cmd: cmd, state: t.TempDir(), exited: make(chan struct{})}
	go func() {
		g.err = cmd.Wait()
		close(g.exited)
	}()
	done := make(chan struct{})
	go func() {
		g.stop(true)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(gatewayStopTimeout - 5*time.Second):
		t.Fatalf("a hurried stop still waited on a gateway that ignores SIGTERM")
	}
	if g.err == nil {
		t.Fatal("the gateway was not killed")
	}
}
