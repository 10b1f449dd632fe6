package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/experiment"
	"gantry.dev/gantry/pkg/sim"
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

// checkFrontier refuses a --frontier that cannot run: it sweeps
// oracle-predicted's headroom on one condition.
func checkFrontier(f *simFlags, jobs []experiment.Job) ([]float64, error) {
	policies, err := experiment.ParsePolicies(f.policies)
	if err != nil {
		return nil, asUsage(err)
	}
	switch {
	case len(policies) != 1 || policies[0] != "oracle-predicted":
		return nil, usagef("--frontier sweeps oracle-predicted's headroom: give --policies oracle-predicted, got %q", f.policies)
	case f.sloCurve != "":
		return nil, usagef("--frontier cannot be combined with --slo-curve")
	case f.experiment != "":
		return nil, usagef("--frontier cannot be combined with --experiment")
	case len(jobs) != 1:
		return nil, usagef("--frontier runs one condition, got %d", len(jobs))
	case f.predictedLead < 0 || f.predictedLead > sim.MaxPredictedLead:
		return nil, usagef("--predicted-lead must be in [0, %v], got %v", sim.MaxPredictedLead, f.predictedLead)
	}
	var headrooms []float64
	for _, s := range strings.Split(f.frontier, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(v >= 100*sim.MinPredictedHeadroom && v <= 100*sim.MaxPredictedHeadroom) {
			return nil, usagef("--frontier takes headrooms in percent in [%v, %v], got %q", 100*sim.MinPredictedHeadroom, 100*sim.MaxPredictedHeadroom, s)
		}
		headrooms = append(headrooms, v/100)
	}
	if len(headrooms) > slocurve.MaxTargets {
		return nil, usagef("--frontier takes at most %d headrooms, got %d", slocurve.MaxTargets, len(headrooms))
	}
	return headrooms, nil
}

// runFrontier runs the oracle, the fixed pool at --slo-target and
// oracle-predicted once per headroom, and prints them over the oracle.
func runFrontier(cmd *cobra.Command, f *simFlags, jobs []experiment.Job) error {
	headrooms, err := checkFrontier(f, jobs)
	if err != nil {
		return err
	}
	fr, err := slocurve.RunFrontier(cmd.Context(), jobs[0].Config, f.sloTarget/100, f.predictedLead, headrooms)
	if err != nil {
		return err
	}
	if f.out != "" {
		if err := slocurve.WriteFrontier(f.out, fr); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "oracle %.2f; fixed pool at %.3f%%: %.2f (%.4fx), %.4f%%\n", fr.Oracle, 100*fr.Target, fr.FixedPool, fr.FixedPoolRatio, 100*fr.FixedPoolSLO)
	fmt.Fprintf(w, "%-10s %-10s %-10s %-10s %s\n", "headroom", "SLO", "avg live", "÷ oracle", "spawned")
	for _, p := range fr.Predicted {
		fmt.Fprintf(w, "%-10s %-10s %-10.2f %-10.4f %d\n", strconv.FormatFloat(100*p.Headroom, 'f', -1, 64)+"%",
			fmt.Sprintf("%.3f%%", 100*p.Compliance), p.AvgContainers, p.VsOracle, p.Spawned)
	}
	if fr.Reached >= 0 {
		p := fr.Predicted[fr.Reached]
		fmt.Fprintf(w, "oracle-predicted reaches %.3f%% at headroom %s: %.4fx\n", 100*fr.Target, strconv.FormatFloat(100*p.Headroom, 'f', -1, 64)+"%", p.VsOracle)
	} else {
		fmt.Fprintf(w, "oracle-predicted does not reach %.3f%% at any headroom given\n", 100*fr.Target)
	}
	return nil
}
