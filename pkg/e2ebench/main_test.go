package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/orchbench"
	"gantry.dev/gantry/pkg/rtcontroller"
	"gantry.dev/gantry/pkg/rtqueue"
)

// instanceEnv makes the test binary the function's instance instead of
// the tests: the process node runs it as the program "gantry".
const instanceEnv = "E2EBENCH_INSTANCE"

func TestMain(m *testing.M) {
	if os.Getenv(instanceEnv) != "" {
		os.Exit(instanceMain())
	}
	os.Exit(m.Run())
}

// instanceMain is what `gantry fn replay --app sentiment-analysis
// --function sentiment` serves, on $POD_IP:$PORT, draining on SIGTERM.
func instanceMain() int {
	h, err := functions.Handler("replay", functions.WithReplay("sentiment-analysis", "sentiment", 1))
	if err != nil {
		fmt.Println(err)
		return 2
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("POD_IP"), os.Getenv("PORT")))
	if err != nil {
		fmt.Println("listen:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := functions.Serve(ctx, ln, h, 10*time.Second); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// TestRunTiny runs both orchestrators for a few seconds of load beside
// small churn on the real control plane and checks that both report
// requests and that none failed or went unanswered. It asserts nothing
// about latency: the machine may be loaded.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local control plane; skipped under -short")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	o := DefaultOptions()
	o.Program, o.Command, o.Env = self, "gantry", map[string]string{instanceEnv: "1"}
	o.CRDPath = filepath.Join(root, "config", "crd", "bases", "gantry.dev_rtresources.yaml")
	o.ConfigDir = filepath.Join(root, "config")
	o.Rate, o.Duration, o.Burst, o.MaxScale = 20, 4*time.Second, 5, 3
	o.Mode = orchbench.ModeContinuous
	o.Controller = rtcontroller.AppConfig{
		Options:   rtcontroller.Options{QPS: 50, Burst: 100},
		QueueKind: rtcontroller.QueueRT, FIFOWorkers: rtcontroller.FIFOWorkers,
		Pool: rtqueue.DefaultPoolConfig(), Critical: rtqueue.PaperCriticalBand(),
	}
	if testing.Verbose() {
		o.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, o)
	if errors.Is(err, ErrNotRouted) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Interrupted || len(rep.Runs) != 2 {
		t.Fatalf("interrupted %v, %d runs: %+v", rep.Interrupted, len(rep.Runs), rep.Runs)
	}
	for i, orch := range Orchestrators {
		r := rep.Runs[i]
		t.Logf("%+v", r)
		if r.Orchestrator != orch || r.Requests == 0 || r.Errors != 0 {
			t.Errorf("run %d: %+v; want %s with requests and no errors", i, r, orch)
		}
		n := 0
		for _, s := range rep.Samples {
			if s.Orchestrator == orch {
				n++
			}
		}
		if int64(n) != r.Requests {
			t.Errorf("%s: %d samples for %d requests", orch, n, r.Requests)
		}
	}
}
