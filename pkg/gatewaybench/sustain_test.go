package gatewaybench

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A short sustained run through real gateway and instance processes: every
// offered request is accounted for, every second is sampled with the
// gateway's heap and RSS, and each process's CPU is reported.
func TestSustainThroughChildProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and loads them for 2 s")
	}
	o := DefaultSustainOptions()
	o.Rate, o.Duration, o.Warmup, o.GOMAXPROCS = 300, 2*time.Second, 0, 2
	o.Command = []string{script(t, sustainEnv+"=1")}
	rep, err := Sustain(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var errs int64
	for _, n := range rep.Errors {
		errs += n
	}
	// A stalled machine may lose a connection or two; nothing may vanish.
	if rep.Offered == 0 || rep.Completed+errs != rep.Offered || errs > rep.Offered/20 {
		t.Fatalf("offered %d, completed %d, errors %v", rep.Offered, rep.Completed, rep.Errors)
	}
	// One sample a second while the load runs: 2 s, and on a stalled
	// machine the tail of requests still in flight, each bounded by
	// requestTimeout.
	if most := rep.Seconds + int(requestTimeout/time.Second) + 1; len(rep.Timeline) < 1 || len(rep.Timeline) > most {
		t.Fatalf("%d seconds sampled in a %d s run (at most %d)", len(rep.Timeline), rep.Seconds, most)
	}
	// Every second reads the gateway's resident memory from /proc; its
	// /metrics, scraped with a bound (scrapeTimeout), a loaded machine may
	// miss in some seconds but not in all.
	read := false
	for i, s := range rep.Timeline {
		if s.Second != i+1 || s.GatewayRSSMiB <= 0 {
			t.Fatalf("second %d (sample %d): RSS %v MiB: the gateway was not read", s.Second, i, s.GatewayRSSMiB)
		}
		read = read || (s.GatewayHeapMiB > 0 && s.GatewayGoroutines > 0)
	}
	if !read {
		t.Fatalf("the gateway's /metrics was read in none of %d seconds: %+v", len(rep.Timeline), rep.Timeline)
	}
	if len(rep.CPU) != 3 || rep.CPU[1].Process != "gateway" || rep.CPU[1].Seconds <= 0 || rep.CPU[2].Seconds <= 0 {
		t.Fatalf("CPU %+v: want the generator, the gateway and the instance, the children's measured", rep.CPU)
	}
	dir := t.TempDir()
	if err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"completed_rps", "cpu", "timeline", "heap_first_mib", "heap_last_mib", "errors"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report.json lacks %q", k)
		}
	}
	csv, err := os.ReadFile(filepath.Join(dir, "timeline.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csv), "\n"); lines != len(rep.Timeline)+1 {
		t.Fatalf("timeline.csv has %d lines for %d seconds", lines, len(rep.Timeline))
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "gateway heap in use") {
		t.Fatalf("table: %v\n%s", err, table.String())
	}
}

func TestSustainValidate(t *testing.T) {
	ok := DefaultSustainOptions()
	ok.Command = []string{"x"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*SustainOptions){
		"rate":       func(o *SustainOptions) { o.Rate = MaxRate + 1 },
		"duration":   func(o *SustainOptions) { o.Duration = 1500 * time.Millisecond },
		"warm-up":    func(o *SustainOptions) { o.Warmup = -time.Second },
		"body":       func(o *SustainOptions) { o.BodyBytes = 0 },
		"in-flight":  func(o *SustainOptions) { o.MaxInFlight = 0 },
		"gomaxprocs": func(o *SustainOptions) { o.GOMAXPROCS = -1 },
		"command":    func(o *SustainOptions) { o.Command = nil },
	} {
		o := ok
		mut(&o)
		if err := o.Validate(); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: %v, want ErrBadOptions", name, err)
		}
	}
}
