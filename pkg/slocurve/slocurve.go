// Package slocurve traces gantry's SLO-versus-containers curve: the same
// simulated condition run with the SLO sizing's target ε swept
// (policy.Spec.SLOTarget), each run's measured SLO compliance against its
// mean live containers. `gantry sim --slo-curve` writes it as JSON and a
// PNG.
package slocurve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gantry.dev/gantry/pkg/sim"
)

// MaxTargets bounds the points of one curve.
const MaxTargets = 32

// ErrBadTargets marks a target list that cannot make a curve.
var ErrBadTargets = errors.New("bad SLO targets")

// Point is one run of the curve.
type Point struct {
	// Target is the SLO target the policy sized for, a fraction.
	Target float64 `json:"slo_target"`
	// Compliance is the share of requests that met the SLO.
	Compliance    float64 `json:"slo_compliance"`
	AvgContainers float64 `json:"avg_containers"`
	Spawned       int64   `json:"containers_spawned"`
	P99Ms         float64 `json:"p99_ms"`
}

// Curve is the swept condition and its points, in target order.
type Curve struct {
	Policy string  `json:"policy"`
	Points []Point `json:"points"`
}

// Run simulates base once per target (fractions in (0, 1)), one after
// another; it stops at the first error or when ctx ends.
func Run(ctx context.Context, base sim.Config, targets []float64) (Curve, error) {
	if len(targets) == 0 || len(targets) > MaxTargets {
		return Curve{}, fmt.Errorf("%w: %d targets, want 1 to %d", ErrBadTargets, len(targets), MaxTargets)
	}
	for _, t := range targets {
		if !(t > 0 && t < 1) {
			return Curve{}, fmt.Errorf("%w: %v is not a fraction in (0, 1)", ErrBadTargets, t)
		}
	}
	c := Curve{Policy: base.Policy}
	for _, t := range targets {
		cfg := base
		cfg.SLOTarget = t
		r, err := sim.RunContext(ctx, cfg)
		if err != nil {
			return c, err
		}
		c.Points = append(c.Points, Point{Target: t, Compliance: r.SLOCompliance, AvgContainers: r.AvgContainers,
			Spawned: r.ContainersSpawned, P99Ms: float64(r.P99) / float64(time.Millisecond)})
	}
	return c, nil
}

// Files Write creates in its folder.
const (
	JSONFile = "slo-curve.json"
	PNGFile  = "slo-curve.png"
)

// Write puts the curve in dir as JSONFile and PNGFile: measured SLO
// misses (log scale) against mean live containers, one point a target,
// and each target's own miss share as a dashed line.
func Write(dir string, c Curve) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, JSONFile), append(data, '\n'), 0o644); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: SLO misses vs containers as the SLO target varies", c.Policy)
	p.X.Label.Text = "mean live containers"
	p.Y.Label.Text = "share of requests missing the SLO"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	measured, wanted := make(plotter.XYs, 0, len(c.Points)), make(plotter.XYs, 0, len(c.Points))
	for _, pt := range c.Points {
		// A run without a miss is drawn at a tenth of its target's
		// share: a log axis has no zero.
		miss := max(1-pt.Compliance, (1-pt.Target)/10)
		measured = append(measured, plotter.XY{X: pt.AvgContainers, Y: miss})
		wanted = append(wanted, plotter.XY{X: pt.AvgContainers, Y: 1 - pt.Target})
	}
	line, points, err := plotter.NewLinePoints(measured)
	if err != nil {
		return err
	}
	target, err := plotter.NewLine(wanted)
	if err != nil {
		return err
	}
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(line, points, target)
	p.Legend.Add("measured", line, points)
	p.Legend.Add("target ε = 1 - SLO target", target)
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, PNGFile))
}
