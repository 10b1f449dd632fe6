//go:build !gantry_local

package cli

import (
	"testing"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/orchbench"
	"gantry.dev/gantry/pkg/rtqueue"
)

// Every bad flag is a usage error before a cluster is started.
func TestBenchOrchestrationBadFlagsAreUsageErrors(t *testing.T) {
	cases := [][]string{
		{"--services", "0"},
		{"--replicas", "0"},
		{"--repetitions", "0"},
		{"--iteration", "500ms"},
		{"--gap", "0s"},
		{"--gomaxprocs", "-1"},
		{"--controllers", "vanilla,kubeflow"},
		{"--cases", "continuous"},
		{"--cases", "bursty:5"},
		{"--cases", "interval:0"},
		{"--controller-args", "--queue=lifo"},
		{"--controller-args", "--no-such-flag"},
		{"--no-such-flag"},
		{"extra-arg"},
		// The Knative run's flags need --knative; the benchmark's own
		// scaling flags mean nothing with it (Knative's KPA scales).
		{"--rate", "5"},
		{"--max-scale", "2"},
		{"--knative-ingress", "127.0.0.1:8081"},
		{"--knative", "--replicas", "2"},
		{"--knative", "--gap", "1s"},
		{"--knative", "--rate", "0"},
		{"--knative", "--rate", "1000"},
		{"--knative", "--container-concurrency", "0"},
		{"--knative", "--max-scale", "-1"},
		{"--knative", "--request-timeout", "0s"},
		{"--knative", "--warmup", "1h"},
		{"--knative", "--continuous-period", "-1s"},
		{"--knative", "--continuous-period", "11s"},
		{"--knative", "--scale-to-zero-grace", "-1s"},
		{"--knative", "--scale-to-zero-grace", "1h"},
		{"--continuous-period", "2s"},
		{"--scale-to-zero-grace", "6s"},
		{"--knative", "--services", "21"},
		{"--knative", "--controllers", "vanilla,gantry-fifo"},
		{"--knative", "--kubeconfig", "/nonexistent/kubeconfig"},
	}
	assertUsageErrors(t, []string{"bench", "orchestration"}, cases)
}

// The in-process controller is configured by the same flags as
// `gantry controller`, so RQ1's criticalities 1..10 are critical.
func TestControllerAppConfigParsesControllerFlags(t *testing.T) {
	app, err := controllerAppConfig(rq1ControllerArgs + " --queue=fifo --fifo-workers=3")
	if err != nil {
		t.Fatal(err)
	}
	if app.Critical.From != 1 || app.Critical.To != 10 || app.QueueKind != "fifo" || app.FIFOWorkers != 3 {
		t.Fatalf("got %+v", app)
	}
	if def := rtqueue.DefaultPoolConfig(); app.Pool.Max != def.Max {
		t.Fatalf("pool %+v, want the default %+v", app.Pool, def)
	}
}

// --repetitions wins over --quick's one repetition, with --knative too,
// and --knative --quick --repetitions 0 is still refused.
func TestRepetitionsOverrideQuick(t *testing.T) {
	for _, knative := range []bool{false, true} {
		opts := orchbench.DefaultOptions()
		var kn knativeBenchFlags
		cmd := &cobra.Command{Use: "orchestration"}
		var controllers, cases string
		cmd.Flags().IntVar(&opts.Repetitions, "repetitions", opts.Repetitions, "")
		cmd.Flags().StringVar(&controllers, "controllers", "", "")
		cmd.Flags().StringVar(&cases, "cases", "", "")
		kn.register(cmd, &opts)
		args := []string{"--repetitions", "3"}
		if knative {
			args = append(args, "--knative")
		}
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		if err := applyBenchFlags(cmd, &opts, &kn, true, rq1ControllerArgs, controllers, cases); err != nil {
			t.Fatal(err)
		}
		if opts.Repetitions != 3 {
			t.Errorf("knative %v: --quick --repetitions 3 gave %d repetitions", knative, opts.Repetitions)
		}
		if err := opts.Validate(); err != nil {
			t.Fatalf("knative %v: --quick --repetitions 3: %v", knative, err)
		}
		if err := cmd.ParseFlags([]string{"--repetitions", "0"}); err != nil {
			t.Fatal(err)
		}
		if err := applyBenchFlags(cmd, &opts, &kn, true, rq1ControllerArgs, controllers, cases); err != nil {
			t.Fatal(err)
		}
		if err := opts.Validate(); err == nil {
			t.Errorf("knative %v: --quick --repetitions 0 passed validation", knative)
		}
	}
}
