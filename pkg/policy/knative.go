package policy

import (
	"fmt"
	"math"
	"time"
)

// Knative's KPA defaults (the Knative Serving autoscaler config). Gantry's
// containers run one request at a time, as a Knative revision with
// containerConcurrency 1, so the per-pod target is min(100, 1) x 70%.
const (
	KnativeTargetConcurrency = 100.0
	KnativeContainerConc     = 1.0
	KnativeUtilization       = 0.70
	KnativeStableWindow      = 60 * time.Second
	KnativePanicWindow       = 6 * time.Second // 10% of the stable window
	KnativePanicThreshold    = 2.0             // 200%
	KnativeMaxScaleUpRate    = 1000.0
	KnativeMaxScaleDownRate  = 2.0
	KnativeTick              = 2 * time.Second
	KnativeScaleToZeroGrace  = 30 * time.Second
)

// knative is a KPA-like autoscaler: per function it averages the observed
// concurrency (requests running or waiting) over a 60 s stable and a 6 s
// panic window, wants ceil(average / target) pods, bounded by the scale-up
// and scale-down rates, and decides every 2 s. When the panic window asks
// for at least twice the ready pods it panics: it follows the panic
// window and never scales down until the stable window has passed without
// that condition. A function with no request in flight for the grace
// period scales to zero; the driver starts one container for a request
// that finds none (Knative's activator).
type knative struct {
	fns []knFn
}

type knFn struct {
	samples    []knSample // within the stable window, oldest first
	head       int
	stableSum  float64
	panicSum   float64
	panicFrom  int // first sample inside the panic window
	panicking  bool
	panicUntil time.Time
	panicPods  int
	lastActive time.Time
	nextTick   time.Time
	seen       bool
}

type knSample struct {
	at time.Time
	v  float64
}

func newKnative(spec Spec) *knative {
	return &knative{fns: make([]knFn, len(spec.Functions))}
}

func (*knative) Name() string                        { return "knative" }
func (*knative) Order() Order                        { return FIFO }
func (*knative) Caps() Caps                          { return knativeCaps }
func (*knative) Estimate(int, float64) time.Duration { return 0 }

// Arrive starts nothing: requests wait in the queue (the activator's
// buffer) and the driver starts a first container for a function that has
// none.
func (*knative) Arrive(time.Time, int, float64, Counts) int { return 0 }

func (k *knative) Complete(fn int, size float64, exec time.Duration, output float64) error {
	if fn < 0 || fn >= len(k.fns) {
		return fmt.Errorf("%w: function %d of %d", ErrBadSpec, fn, len(k.fns))
	}
	return checkSample(size, exec, output)
}

// knTarget is the concurrency one pod is meant to carry.
func knTarget() float64 {
	return min(KnativeTargetConcurrency, KnativeContainerConc) * KnativeUtilization
}

func (k *knative) Plan(now time.Time, views []View, out []Decision) {
	for i := range views {
		out[i] = k.fns[i].plan(now, &views[i])
	}
}

func (f *knFn) plan(now time.Time, v *View) Decision {
	busy := v.Live - v.Idle - v.Starting
	conc := float64(busy + v.Queued)
	f.observe(now, conc)
	if !f.seen {
		f.seen, f.nextTick, f.lastActive = true, now, now
	}
	if conc > 0 {
		f.lastActive = now
	}
	if now.Before(f.nextTick) {
		return Decision{}
	}
	f.nextTick = now.Add(KnativeTick)
	want := f.desired(now, v.Live-v.Starting)
	switch {
	case want > v.Live:
		return Decision{Add: want - v.Live}
	case want < v.Live && !f.panicking:
		return Decision{Retire: min(v.Idle, v.Live-want)}
	}
	return Decision{}
}

// observe adds a concurrency sample and drops those that left the windows.
func (f *knFn) observe(now time.Time, conc float64) {
	f.samples = append(f.samples, knSample{at: now, v: conc})
	f.stableSum += conc
	f.panicSum += conc
	for f.head < len(f.samples) && now.Sub(f.samples[f.head].at) >= KnativeStableWindow {
		f.stableSum -= f.samples[f.head].v
		f.head++
	}
	f.panicFrom = max(f.panicFrom, f.head)
	for f.panicFrom < len(f.samples) && now.Sub(f.samples[f.panicFrom].at) >= KnativePanicWindow {
		f.panicSum -= f.samples[f.panicFrom].v
		f.panicFrom++
	}
	// Compact once the dropped prefix dominates, so memory stays bounded.
	if f.head > 1024 && f.head > len(f.samples)/2 {
		n := copy(f.samples, f.samples[f.head:])
		f.samples = f.samples[:n]
		f.panicFrom -= f.head
		f.head = 0
	}
}

func (f *knFn) average(from int, sum float64) float64 {
	if n := len(f.samples) - from; n > 0 {
		return max(0, sum/float64(n))
	}
	return 0
}

// desired is the KPA's pod count for ready pods.
func (f *knFn) desired(now time.Time, ready int) int {
	stable := f.average(f.head, f.stableSum)
	panicV := f.average(f.panicFrom, f.panicSum)
	readyF := math.Max(1, float64(ready))
	up := int(math.Ceil(KnativeMaxScaleUpRate * readyF))
	down := int(math.Floor(readyF / KnativeMaxScaleDownRate))
	clamp := func(x float64) int { return min(up, max(down, int(math.Ceil(x/knTarget())))) }
	dStable, dPanic := clamp(stable), clamp(panicV)
	over := float64(int(math.Ceil(panicV/knTarget())))/readyF >= KnativePanicThreshold
	switch {
	case over:
		if !f.panicking {
			f.panicking, f.panicPods = true, ready
		}
		f.panicUntil = now.Add(KnativeStableWindow)
	case f.panicking && !now.Before(f.panicUntil):
		f.panicking, f.panicPods = false, 0
	}
	want := dStable
	if f.panicking {
		// In panic mode the KPA never scales down.
		f.panicPods = max(f.panicPods, dPanic)
		want = f.panicPods
	}
	if want == 0 && now.Sub(f.lastActive) < KnativeScaleToZeroGrace {
		want = 1
	}
	return want
}
