//go:build !gantry_local

package cli

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/rtqueue/queuebench"
)

func newBenchQueueCmd() *cobra.Command {
	var (
		opts       queuebench.Options
		asJSON     bool
		queues     string
		scenarios  string
		workers    []int
		gomaxprocs []int
	)
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Enqueue-to-start latency of critical items on a saturated work queue",
		Long: "Compares client-go's workqueue, controller-runtime's priorityqueue and Gantry's " +
			"rtqueue engine with its mechanisms switched on one at a time (priority order, the " +
			"reserve, nice values, SCHED_FIFO), every queue at the same worker count and the same " +
			"GOMAXPROCS, while a background of low-priority items keeps every queue saturated and " +
			"one critical item, with work of its own, arrives per period. The second table splits " +
			"client-go's gap to Gantry into ordering, reserve and real time.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Queues, opts.Scenarios, opts.Workers, opts.GOMAXPROCS = splitList(queues), splitList(scenarios), workers, gomaxprocs
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
	f.BoolVar(&asJSON, "json", false, `print {"results":[{"queue","scenario","workers","gomaxprocs","p50_us","p99_us","max_us","done_p50_us","done_p99_us","background_per_s"}],"shares":[...]}`)
	f.StringVar(&queues, "queues", strings.Join(queuebench.Queues, ","), "comma-separated queues to compare")
	f.StringVar(&scenarios, "scenarios", strings.Join(queuebench.Scenarios, ","), "comma-separated scenarios")
	f.IntVar(&opts.Backlog, "backlog", 50, "background items kept queued")
	f.DurationVar(&opts.CriticalEvery, "critical-every", 10*time.Millisecond, "period of critical items")
	f.DurationVar(&opts.ItemWork, "item-work", 20*time.Millisecond, "work per background item")
	f.DurationVar(&opts.CriticalWork, "critical-work", 2*time.Millisecond, "work per critical item (split like background work)")
	f.IntSliceVar(&workers, "workers", []int{queuebench.DefaultWorkers}, "worker counts to compare at, the same for every queue (the baselines' goroutines, Gantry's fixed pool)")
	f.IntVar(&opts.Reserve, "reserve", 1, "workers of a Gantry pool kept for critical items (gantry-reserve, gantry-nort, gantry)")
	f.IntSliceVar(&gomaxprocs, "gomaxprocs", nil, "GOMAXPROCS values to compare at, the same for every queue (default: NumCPU and NumCPU+workers)")
	return cmd
}
