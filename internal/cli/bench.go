package cli

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/rtqueue/queuebench"
)

// newBenchCmd is the parent of Gantry's benchmarks; each is a subcommand.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run Gantry's benchmarks",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchQueueCmd())
	cmd.AddCommand(newBenchGatewayCmd())
	cmd.AddCommand(newBenchSimLiveCmd())
	cmd.AddCommand(newBenchOrchestrationCmd())
	return cmd
}

func newBenchQueueCmd() *cobra.Command {
	var (
		opts       queuebench.Options
		asJSON     bool
		queues     string
		scenarios  string
		gomaxprocs int
	)
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Enqueue-to-start latency of critical items on a saturated work queue",
		Long: "Compares client-go's workqueue, controller-runtime's priorityqueue and Gantry's " +
			"rtqueue engine (with and without SCHED_FIFO) while a background of low-priority " +
			"items keeps every queue saturated and one critical item arrives per period.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Queues, opts.Scenarios, opts.GOMAXPROCS = splitList(queues), splitList(scenarios), gomaxprocs
			if err := opts.Validate(); err != nil {
				return usagef("bench queue: %v", err)
			}
			rep, err := queuebench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			return rep.WriteTable(cmd.OutOrStdout())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("bench queue: %v", err) })
	f := cmd.Flags()
	f.DurationVar(&opts.Duration, "duration", 5*time.Second, "length of each case, warm-up (a tenth, at most 1s) included")
	f.BoolVar(&asJSON, "json", false, `print {"results":[{"queue","scenario","p50_us","p99_us","max_us","background_per_s"}]}`)
	f.StringVar(&queues, "queues", strings.Join(queuebench.Queues, ","), "comma-separated queues to compare")
	f.StringVar(&scenarios, "scenarios", strings.Join(queuebench.Scenarios, ","), "comma-separated scenarios")
	f.IntVar(&opts.Backlog, "backlog", 50, "background items kept queued")
	f.DurationVar(&opts.CriticalEvery, "critical-every", 10*time.Millisecond, "period of critical items")
	f.DurationVar(&opts.ItemWork, "item-work", 20*time.Millisecond, "work per background item")
	f.IntVar(&gomaxprocs, "gomaxprocs", 0, "GOMAXPROCS for the gantry cases: 0 = engine's recommendation, -1 = unchanged")
	f.IntVar(&opts.BaselineGOMAXPROCS, "baseline-gomaxprocs", 0, "GOMAXPROCS for the clientgo and ctrlruntime cases: 0 = unchanged")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
