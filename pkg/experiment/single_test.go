package experiment

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

func goodSpec() Spec {
	return Spec{App: "audio-translation", Dist: "light", Trace: "wiki", Rate: 100,
		Duration: time.Minute, Policies: []string{"atoll", "cypress"}, Seed: 3, Nodes: 6, CoresPerNode: 48}
}

func TestSpecJobsBuildOneConfigPerPolicy(t *testing.T) {
	jobs, err := goodSpec().Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Config.Policy != "atoll" || jobs[1].Config.Policy != "cypress" {
		t.Fatalf("jobs = %+v", jobs)
	}
	c := jobs[1].Config
	if c.App.Name != "audio-translation" || c.Dist.Name() != "light" || c.Trace.Name != "wiki" ||
		c.Trace.Duration() != time.Minute || c.Nodes != 6 || c.CoresPerNode != 48 || c.Seed != 3 {
		t.Errorf("config = %+v", c)
	}
	if math.Abs(c.Trace.Mean()-100) > 1e-6 {
		t.Errorf("mean rate %.2f, want 100", c.Trace.Mean())
	}
}

func TestSpecPeakRescalesTheTrace(t *testing.T) {
	s := goodSpec()
	s.Peak = 500
	jobs, err := s.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if p := jobs[0].Config.Trace.Peak(); math.Abs(p-500) > 1e-6 {
		t.Errorf("peak %.2f, want 500", p)
	}
}

func TestSpecReplaysAFileTruncatedAndRescaled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "load.csv")
	if err := os.WriteFile(path, []byte("10\n20\n30\n40\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := goodSpec()
	s.TraceFile, s.Duration, s.Rate = path, 3*time.Second, 40
	jobs, err := s.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	tr := jobs[0].Config.Trace
	if tr.Name != "load" || len(tr.PerSecond) != 3 || tr.PerSecond[2] != 60 {
		t.Errorf("trace = %+v, want the first 3 s scaled to mean 40", tr)
	}
	s.Rate, s.Duration = 0, 0
	jobs, _ = s.Jobs()
	if got := jobs[0].Config.Trace.PerSecond; len(got) != 4 || got[3] != 40 {
		t.Errorf("rate 0 must keep the file as is, got %v", got)
	}
}

func TestSpecRejectsBadInput(t *testing.T) {
	cases := []struct {
		mod  func(*Spec)
		want error
	}{
		{func(s *Spec) { s.App = "tetris" }, workload.ErrUnknownApp},
		{func(s *Spec) { s.Dist = "bimodal" }, workload.ErrUnknownDist},
		{func(s *Spec) { s.Trace = "zipf" }, trace.ErrUnknownTrace},
		{func(s *Spec) { s.Policies = []string{"cypress", "lambda"} }, policy.ErrUnknownPolicy},
		{func(s *Spec) { s.Policies = nil }, ErrBadSpec},
		{func(s *Spec) { s.Rate = 0 }, trace.ErrBadRate},
		{func(s *Spec) { s.Rate = -5 }, ErrBadSpec},
		{func(s *Spec) { s.Peak = -5 }, ErrBadSpec},
		{func(s *Spec) { s.Rate = math.NaN() }, ErrBadSpec},
		{func(s *Spec) { s.Duration = 0 }, trace.ErrBadDuration},
		{func(s *Spec) { s.Duration = -time.Minute }, ErrBadSpec},
		{func(s *Spec) { s.Nodes = 0 }, ErrBadSpec},
		{func(s *Spec) { s.CoresPerNode = -1 }, ErrBadSpec},
		{func(s *Spec) { s.ColdStart = -time.Second }, ErrBadSpec},
		{func(s *Spec) { s.TraceFile = "/nonexistent/trace.csv" }, os.ErrNotExist},
		{func(s *Spec) { s.MinSize = -1 }, workload.ErrBadSize},
		{func(s *Spec) { s.MaxSize = 1 }, workload.ErrBadSize},
		{func(s *Spec) { s.MinSize, s.MaxSize = 100, 50 }, workload.ErrBadSize},
	}
	for i, c := range cases {
		s := goodSpec()
		c.mod(&s)
		if _, err := s.Jobs(); !errors.Is(err, c.want) {
			t.Errorf("case %d: err = %v, want %v", i, err, c.want)
		}
	}
}

func TestParsePolicies(t *testing.T) {
	all, err := ParsePolicies("all")
	if err != nil || len(all) != len(policy.Names()) {
		t.Errorf("all: %v %v", all, err)
	}
	got, err := ParsePolicies(" cypress, atoll,cypress ,")
	if err != nil || strings.Join(got, ",") != "cypress,atoll" {
		t.Errorf("got %v %v", got, err)
	}
	if _, err := ParsePolicies("cypress,nope"); !errors.Is(err, policy.ErrUnknownPolicy) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := ParsePolicies(" , "); !errors.Is(err, ErrBadSpec) {
		t.Errorf("empty: %v", err)
	}
}

func TestSpecSizeRangeReplacesTheApps(t *testing.T) {
	s := goodSpec()
	s.MinSize, s.MaxSize = 64, 128
	jobs, err := s.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	app := jobs[0].Config.App
	def, _ := workload.Lookup(s.App)
	if app.MinSize != 64 || app.MaxSize != 128 || app.SLO >= def.SLO {
		t.Errorf("range [%v, %v], SLO %v (default %v)", app.MinSize, app.MaxSize, app.SLO, def.SLO)
	}
}

// Ablations can be named for a single condition but are not part of "all".
func TestParsePoliciesAcceptsAblationsByName(t *testing.T) {
	got, err := ParsePolicies("cypress-no-cp, cypress-cp,gantry-no-panic")
	if err != nil || len(got) != 3 {
		t.Fatalf("got %v, %v", got, err)
	}
	all, _ := ParsePolicies("all")
	if slices.Contains(all, "cypress-cp") {
		t.Error(`"all" lists an ablation`)
	}
	if _, err := ParsePolicies("cypress-magic"); !errors.Is(err, policy.ErrUnknownPolicy) {
		t.Errorf("unknown ablation: %v", err)
	}
}
