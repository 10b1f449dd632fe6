package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/liverun"
	"gantry.dev/gantry/pkg/workload"
)

// gantry up runs each policy behind a gateway process of its own and drives
// all of them with the same arrivals: the same requests reach every policy,
// and the report has the conventions' JSON shape, the plots and a verdict.
func TestUpComparesPoliciesSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two gateway processes and their instances")
	}
	t.Setenv(cliChildEnv, "1")
	out := t.TempDir()
	root := newRootCmd()
	var stdout bytes.Buffer
	root.SetOut(&stdout)
	root.SetArgs([]string{"up", "--policy", "gantry,cypress", "--app", "sentiment-analysis", "--trace", "poisson",
		"--rate", "4", "--duration", "4s", "--warmup", "2s", "--start-delay", "0s", "--out", out, "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		App       string  `json:"app"`
		Trace     string  `json:"trace"`
		Rate      float64 `json:"rate"`
		DurationS float64 `json:"duration_s"`
		Seed      uint64  `json:"seed"`
		Runs      []struct {
			Policy        string  `json:"policy"`
			Requests      int64   `json:"requests"`
			Errors        int64   `json:"errors"`
			SLOMs         float64 `json:"slo_ms"`
			SLOCompliance float64 `json:"slo_compliance"`
			AvgContainers float64 `json:"avg_containers"`
			P99Ms         float64 `json:"p99_ms"`
		} `json:"runs"`
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if rep.App != "sentiment-analysis" || rep.Trace != "poisson" || rep.Rate != 4 || rep.DurationS != 4 || rep.Seed != 1 {
		t.Errorf("header = %+v", rep)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Policy != "gantry" || rep.Runs[1].Policy != "cypress" {
		t.Fatalf("runs = %+v", rep.Runs)
	}
	for _, r := range rep.Runs {
		if r.Requests == 0 || r.Requests != rep.Runs[0].Requests {
			t.Errorf("%s got %d requests, gantry %d: every policy must get the same arrivals", r.Policy, r.Requests, rep.Runs[0].Requests)
		}
		if r.SLOMs <= 0 || r.AvgContainers <= 0 || r.P99Ms <= 0 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
	}
	if rep.Verdict == "" {
		t.Error("no verdict")
	}
	for _, f := range []string{liverun.UpReportFile, liverun.UpJSONFile, liverun.UpInstancesPlot, liverun.UpLatencyPlot} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, liverun.UpReportFile))
	if !strings.Contains(string(md), "| gantry |") || !strings.Contains(string(md), "**Verdict:**") {
		t.Errorf("report.md:\n%s", md)
	}
	// The SLO is the default factor times the app's largest execution.
	model, _ := workload.Lookup("sentiment-analysis")
	wantSLO := time.Duration(liverun.DefaultUpSLOFactor * float64(model.MaxExec())).Round(time.Millisecond)
	if got := time.Duration(rep.Runs[0].SLOMs * float64(time.Millisecond)); got != wantSLO {
		t.Errorf("SLO %v, want %v", got, wantSLO)
	}
	// requests.csv has one row per answered request of each policy.
	csvData, err := os.ReadFile(filepath.Join(out, liverun.UpRequestsFile))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(csvData)), "\n")[1:] {
		rows[strings.Split(line, ",")[0]]++
	}
	for _, r := range rep.Runs {
		if r.Errors == 0 && rows[r.Policy] != r.Requests {
			t.Errorf("%s: %d rows in %s for %d requests", r.Policy, rows[r.Policy], liverun.UpRequestsFile, r.Requests)
		}
	}
}

// The progress line keeps a number and its unit together, and shows the
// p99, SLO compliance and errors.
func TestUpProgressText(t *testing.T) {
	line := progressText(liverun.ArmProgress{Name: "gantry", Phase: "measure", Elapsed: 20 * time.Second,
		Total: 90 * time.Second, Done: 150, Live: 7, P99: 812345 * time.Microsecond, SLOCompliance: 0.9987, Errors: 2})
	for _, want := range []string{"20s/90s", "done    150", "live    7", "p99   812ms", "SLO  99.87%", "errors 2"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	if empty := progressText(liverun.ArmProgress{Name: "atoll", Phase: "warmup"}); !strings.Contains(empty, "p99       –") {
		t.Errorf("before any answer: %q", empty)
	}
}

// Under each policy's line, one line per function: the SLO it is bound
// to, its state, requests running and queued, and its instances as a bar
// (■ ready, □ starting); a redraw with fewer lines clears the rest.
func TestUpProgressShowsEachFunction(t *testing.T) {
	var out strings.Builder
	p := &progressPrinter{w: &out, tty: true, mu: &sync.Mutex{}}
	arms := []liverun.ArmProgress{
		{Name: "gantry", Phase: "measure", Functions: []liverun.FunctionProgress{
			{Name: "speech-to-text", SLO: "200ms", State: "ready", Running: 3, Queued: 1, Replicas: 5, Available: 3},
			{Name: "send-message", SLO: "89.992861ms", State: "backoff", Replicas: 0},
		}},
		{Name: "knative", Phase: "measure", Functions: []liverun.FunctionProgress{
			{Name: "speech-to-text", SLO: "200ms", State: "ready", Running: 45, Replicas: 45, Available: 45},
		}},
	}
	p.print(arms)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), out.String())
	}
	for i, want := range [][]string{
		{"gantry", "measure"},
		{"speech-to-text", "SLO 200ms", "ready", "running    3", "queued    1", "■■■□□\x1b[K"},
		{"send-message", "SLO 90ms ", "backoff", "running    0"},
		{"knative"},
		{"speech-to-text", strings.Repeat("■", maxBar) + " +5"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	out.Reset()
	p.print(arms[:1])
	if got := out.String(); !strings.HasPrefix(got, "\x1b[5A") || !strings.HasSuffix(got, "\x1b[K\n\x1b[K\n\x1b[2A") {
		t.Errorf("redraw with 3 of 5 lines = %q", got)
	}
}

func TestUpUsageErrors(t *testing.T) {
	assertUsageErrors(t, []string{"up"}, [][]string{
		{"--policy", ""},
		{"--policy", "gantry,gantry"},
		{"--policy", "gantry,"},
		{"--policy", "gantry,,cypress"},
		{"--policy", "oracle"},
		{"--functions", "fake"},
		{"--scenario", "nope"},
		{"--scenario", "criticality", "--policy", "gantry,cypress"},
		{"--idle-timeout", "1ms"},
		{"--slo-factor", "0.5"},
		{"--slo-factor", "2", "--functions", "real"},
		{"--slo-factor", "2", "--scenario", "criticality"},
	})
}

// An interrupted gantry up reports what finished, with counts read from
// gateways that still run, and leaves no gateway, instance or state folder
// behind.
func TestUpInterruptedReportsWhatFinishedAndLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two gateway processes and their instances")
	}
	tmp, out := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "up", "--policy", "gantry,cypress", "--app", "sentiment-analysis", "--trace", "poisson",
		"--rate", "4", "--duration", "5m", "--warmup", "1s", "--start-delay", "0s", "--out", out)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "TMPDIR="+tmp)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// Interrupt once both gateways have answered a few measured requests.
	measuring := regexp.MustCompile(`measure .* done +[1-9]`)
	sc := bufio.NewScanner(stderr)
	seen := 0
	for seen < 2 && sc.Scan() {
		if measuring.MatchString(sc.Text()) {
			seen++
		}
	}
	if seen < 2 {
		t.Fatalf("gantry up ended before measuring: %v", sc.Err())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1 (interrupted)", err)
	}
	var rep struct {
		Interrupted bool `json:"interrupted"`
		Runs        []struct {
			Policy   string `json:"policy"`
			Requests int64  `json:"requests"`
			Spawned  int64  `json:"containers_spawned"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(filepath.Join(out, liverun.UpJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || len(rep.Runs) != 2 {
		t.Fatalf("report = %s", b)
	}
	for _, r := range rep.Runs {
		if r.Requests == 0 || r.Spawned < 0 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "gantry-up-*"))
	if len(left) > 0 {
		t.Errorf("state folders left behind: %v", left)
	}
	if procs := processesUnder(tmp); len(procs) > 0 {
		t.Errorf("processes left running: %v", procs)
	}
}

// processesUnder lists the processes whose command line names dir: the
// gateways name their state folder in it.
func processesUnder(dir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir)) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}
