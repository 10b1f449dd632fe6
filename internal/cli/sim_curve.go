package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/experiment"
	"gantry.dev/gantry/pkg/slocurve"
)

// checkSLOCurve refuses a --slo-curve that cannot run: it sweeps one
// policy's SLO target and writes files, so it needs one policy and --out.
func checkSLOCurve(f *simFlags) ([]float64, error) {
	policies, err := experiment.ParsePolicies(f.policies)
	if err != nil {
		return nil, asUsage(err)
	}
	switch {
	case len(policies) != 1:
		return nil, usagef("--slo-curve sweeps one policy's SLO target: give exactly one in --policies, got %d", len(policies))
	case f.out == "":
		return nil, usagef("--slo-curve writes %s and %s: give --out", slocurve.JSONFile, slocurve.PNGFile)
	case f.experiment != "":
		return nil, usagef("--slo-curve cannot be combined with --experiment")
	}
	var targets []float64
	for _, s := range strings.Split(f.sloCurve, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(v > 0 && v < 100) {
			return nil, usagef("--slo-curve takes percentages in (0, 100), got %q", s)
		}
		targets = append(targets, v/100)
	}
	if len(targets) > slocurve.MaxTargets {
		return nil, usagef("--slo-curve takes at most %d targets, got %d", slocurve.MaxTargets, len(targets))
	}
	return targets, nil
}

// runSLOCurve runs the single job once per SLO target and writes the curve.
func runSLOCurve(cmd *cobra.Command, f *simFlags, jobs []experiment.Job) error {
	targets, err := checkSLOCurve(f)
	if err != nil {
		return err
	}
	c, err := slocurve.Run(cmd.Context(), jobs[0].Config, targets)
	if err != nil {
		return err
	}
	if err := slocurve.Write(f.out, c); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%-10s %-10s %-10s %s\n", "target", "SLO", "avg live", "spawned")
	for _, p := range c.Points {
		fmt.Fprintf(cmd.OutOrStdout(), "%-10s %-10s %-10.2f %d\n", strconv.FormatFloat(100*p.Target, 'f', -1, 64)+"%",
			fmt.Sprintf("%.3f%%", 100*p.Compliance), p.AvgContainers, p.Spawned)
	}
	return nil
}
