package queuebench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the report for people; --json prints Report itself.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tworkers\tgomaxprocs\tqueue\tp50_us\tp99_us\tmax_us\tdone_p50_us\tdone_p99_us\tbackground_per_s\tbackground_per_cpu_s\tcritical_n\tproducer_lag_p99_us\tthreads\t")
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%d\t%.0f\t%s\t\n", x.Scenario, x.Workers, x.GOMAXPROCS, x.Queue,
			x.P50us, x.P99us, x.MaxUs, x.DoneP50us, x.DoneP99us, x.BackgroundPerS, x.BackgroundPerCPUs, x.Critical, x.LagP99us, x.Policy)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Shares) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nclientgo's gap to gantry, split by mechanism (us, and share of the gap):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tworkers\tgomaxprocs\tmetric\tclientgo\tgantry\tgap\tordering\treserve\treal_time\t")
	for _, s := range r.Shares {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.0f\t%.0f\t%.0f\t%.0f (%.1f%%)\t%.0f (%.1f%%)\t%.0f (%.1f%%)\t\n", s.Scenario, s.Workers, s.GOMAXPROCS, s.Metric,
			s.ClientGoUs, s.GantryUs, s.GapUs, s.OrderingUs, 100*s.Ordering, s.ReserveUs, 100*s.Reserve, s.RealTimeUs, 100*s.RealTime)
	}
	return tw.Flush()
}
