package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes one aligned line per record, for a terminal.
func WriteTable(w io.Writer, records []Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "app\tdist\ttrace\tpolicy\trequests\tcontainers\tavg live\t÷ oracle\tbound ÷ oracle\tfixed pool ÷ oracle\tpredicted ÷ oracle\tvs bound\tvs floor\tSLO\tp50 ms\tp99 ms\tjobs/container\tenergy kJ\tcold starts\trejected\t")
	for _, r := range records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.1f\t%.1f\t%d\t%d\t\n",
			r.App, r.Dist, r.Trace, r.Policy, r.Requests, r.ContainersSpawned, r.AvgContainers,
			RatioCell(r, r.AvgContainers), RatioCell(r, r.Bound), RatioCell(r, r.FixedPool), RatioCell(r, r.OraclePredicted),
			vsCell(r.Bound, r.VsBound()), vsCell(r.WorkFloor, r.VsFloor()), Compliance(r.SLOCompliance), r.P50Ms, r.P99Ms, r.JobsPerContainer, r.EnergyJ/1000, r.ColdStarts, r.Rejected)
	}
	return tw.Flush()
}
