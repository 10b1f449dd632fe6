package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/experiment"
	"gantry.dev/gantry/pkg/report"
)

// runAblation runs `gantry sim --experiment ablation`: issue 20's rules
// undone one at a time on the paper matrix and the Azure-format spikes,
// summarised as a table per split (stdout, and report.md, ablation.json
// and every run's results.json/csv in --out).
func runAblation(cmd *cobra.Command, f *simFlags) error {
	plan := experiment.DefaultAblationPlan()
	p, err := paperPlan(cmd, f)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("policies") {
		plan.Paper.Policies = p.Policies
	}
	plan.Paper.Seed, plan.Paper.LargeDuration, plan.Paper.MaxQueue = p.Seed, p.LargeDuration, p.MaxQueue
	plan.Paper.Duration, plan.Paper.ColdStart = p.Duration, p.ColdStart
	if cmd.Flags().Changed("duration") {
		plan.SpikesDuration = f.duration
	}
	jobs, err := experiment.AblationJobs(plan)
	if err != nil {
		return asUsage(err)
	}
	records, wall, err := runMatrix(cmd, f, jobs)
	if err != nil {
		return err
	}
	rows := experiment.AblationRows(records, plan.Paper.Policies)
	meta := experiment.AblationMeta{Plan: plan, Runs: len(jobs), Wall: wall}
	if f.out != "" {
		if err := writeOut(cmd, f, experiment.AblationDocument(records, rows, meta)); err != nil {
			return err
		}
		if err := experiment.WriteAblationJSON(f.out, rows); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(f.out, experiment.AblationFile))
	}
	if f.json {
		return experiment.WriteAblationRowsJSON(cmd.OutOrStdout(), rows)
	}
	return experiment.WriteAblationTable(cmd.OutOrStdout(), rows)
}

// writeOut writes doc's files into --out.
func writeOut(cmd *cobra.Command, f *simFlags, doc report.Document) error {
	if err := report.WriteDir(f.out, doc); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(f.out, report.MarkdownFile))
	return nil
}
