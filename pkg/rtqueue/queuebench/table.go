package queuebench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the report for people; --json prints Report itself.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tqueue\tp50_us\tp99_us\tmax_us\tbackground_per_s\tbackground_per_cpu_s\tcritical_n\tproducer_lag_p99_us\tgomaxprocs\tpolicy\t")
	for _, x := range r.Results {
		policy := x.Policy
		if policy == "" {
			policy = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%d\t%.0f\t%d\t%s\t\n", x.Scenario, x.Queue,
			x.P50us, x.P99us, x.MaxUs, x.BackgroundPerS, x.BackgroundPerCPUs, x.Critical, x.LagP99us, x.Procs, policy)
	}
	return tw.Flush()
}
