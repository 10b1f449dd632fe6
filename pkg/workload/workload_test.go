package workload

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestLookupKnowsEveryPaperApp(t *testing.T) {
	for _, name := range []string{"image-compression", "sentiment-analysis", "email-categorization", "audio-translation", "document-summary"} {
		app, err := Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", name, err)
		}
		if app.Name != name || len(app.Chain) == 0 {
			t.Errorf("Lookup(%q) = %+v", name, app)
		}
	}
	if got := len(Names()); got != 5 {
		t.Errorf("Names() has %d apps, want 5", got)
	}
}

func TestLookupUnknownAppIsSentinel(t *testing.T) {
	_, err := Lookup("nope")
	if !errors.Is(err, ErrUnknownApp) {
		t.Fatalf("err = %v, want ErrUnknownApp", err)
	}
}

func TestAudioTranslationIsThePaperChain(t *testing.T) {
	app, _ := Lookup("audio-translation")
	want := []string{"speech-to-text", "text-translate", "send-message"}
	if len(app.Chain) != len(want) {
		t.Fatalf("chain length %d, want %d", len(app.Chain), len(want))
	}
	for i, f := range app.Chain {
		if f.Name != want[i] {
			t.Errorf("chain[%d] = %s, want %s", i, f.Name, want[i])
		}
	}
	msg := app.Chain[2]
	if msg.SizeSensitive || msg.ExecMean(1) != msg.ExecMean(1000) {
		t.Error("send-message must not be input-size-sensitive")
	}
}

// The paper sets every app's SLO ~20% above its maximum execution time.
func TestSLOIsTwentyPercentAboveMaxExecution(t *testing.T) {
	for _, name := range Names() {
		app, _ := Lookup(name)
		want := 1.2 * float64(app.ExecAt(app.MaxSize))
		if math.Abs(float64(app.SLO)-want) > float64(time.Millisecond) {
			t.Errorf("%s: SLO %v, want 1.2 x %v", name, app.SLO, app.MaxExec())
		}
		if app.ExecAt(app.MinSize) >= app.ExecAt(app.MaxSize) {
			t.Errorf("%s: execution time does not grow with input size", name)
		}
	}
}

func TestSampledExecutionAndOutputArePositiveWithMeanNearModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range Names() {
		app, _ := Lookup(name)
		for _, f := range app.Chain {
			size := (app.MinSize + app.MaxSize) / 2
			const n = 20000
			var sum float64
			for range n {
				d := f.Exec(size, rng)
				if d <= 0 || f.Output(size, rng) <= 0 {
					t.Fatalf("%s/%s: non-positive sample", name, f.Name)
				}
				sum += float64(d)
			}
			mean := sum / n
			if rel := math.Abs(mean/float64(f.ExecMean(size)) - 1); rel > 0.01 {
				t.Errorf("%s/%s: sample mean off model by %.2f%%", name, f.Name, rel*100)
			}
		}
	}
}

func TestModelsMixLinearAndPowerLaw(t *testing.T) {
	var linear, power int
	for _, name := range Names() {
		app, _ := Lookup(name)
		for _, f := range app.Chain {
			if !f.SizeSensitive {
				continue
			}
			// A power law with exponent < 1 is concave; a line has zero
			// second difference.
			a, b, c := float64(f.ExecMean(1)), float64(f.ExecMean(2)), float64(f.ExecMean(3))
			if math.Abs(a-2*b+c) < float64(time.Microsecond) {
				linear++
			} else {
				power++
			}
		}
	}
	if linear == 0 || power == 0 {
		t.Errorf("linear=%d power=%d, want both shapes", linear, power)
	}
}

func TestCheckSizeRejectsNonPositive(t *testing.T) {
	app, _ := Lookup("image-compression")
	for _, s := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if err := app.CheckSize(s); !errors.Is(err, ErrBadSize) {
			t.Errorf("CheckSize(%v) = %v, want ErrBadSize", s, err)
		}
	}
	if err := app.CheckSize(1); err != nil {
		t.Errorf("CheckSize(1) = %v", err)
	}
}

func TestWithSizeRangeRecomputesTheSLO(t *testing.T) {
	app, _ := Lookup("sentiment-analysis")
	small, err := app.WithSizeRange(1, 10)
	if err != nil {
		t.Fatal(err)
	}
	// 25 + 11*10 = 135 ms at the new maximum; the SLO is 1.2x that.
	if small.SLO != 162*time.Millisecond || small.MinSize != 1 || small.MaxSize != 10 {
		t.Errorf("got SLO %v range [%v, %v]", small.SLO, small.MinSize, small.MaxSize)
	}
	if app.SLO == small.SLO {
		t.Error("WithSizeRange changed the receiver or kept the old SLO")
	}
	for _, r := range [][2]float64{{0, 10}, {-1, 10}, {5, 5}, {10, 5}, {1, math.Inf(1)}, {math.NaN(), 3}} {
		if _, err := app.WithSizeRange(r[0], r[1]); !errors.Is(err, ErrBadSize) {
			t.Errorf("WithSizeRange(%v, %v) = %v, want ErrBadSize", r[0], r[1], err)
		}
	}
}

// TestSamplerDrawsWhatExecAndOutputDraw: a Sampler is only faster. From
// the same random numbers it draws, to the bit, what Exec and Output
// draw, and those what the log-normal formula gives with σ worked out
// at every draw; a spread of 0 draws nothing and gives the mean.
func TestSamplerDrawsWhatExecAndOutputDraw(t *testing.T) {
	for _, name := range Names() {
		app, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range app.Chain {
			s := f.Sampler()
			a, b, c := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
			for i := range 2000 {
				size := app.MinSize + (app.MaxSize-app.MinSize)*float64(i)/2000
				want := time.Duration(float64(f.ExecMean(size)) * formulaFactor(f.ExecNoise, c))
				if got, exec := s.Exec(size, a), f.Exec(size, b); got != exec || got != max(want, MinExec) {
					t.Fatalf("%s at %v: sampler %v, Exec %v, formula %v", f.Name, size, got, exec, want)
				}
				want2 := f.OutputMean(size) * formulaFactor(f.OutputNoise, c)
				if got, out := s.Output(size, a), f.Output(size, b); got != out || got != max(want2, minSize) {
					t.Fatalf("%s at %v: sampler output %v, Output %v, formula %v", f.Name, size, got, out, want2)
				}
			}
		}
	}
	quiet := Function{ExecMean: func(float64) time.Duration { return time.Second }, OutputMean: func(s float64) float64 { return s }}
	s, rng := quiet.Sampler(), rand.New(rand.NewPCG(3, 4))
	if got := s.Exec(2, rng); got != time.Second {
		t.Errorf("no noise: exec %v, want the mean 1s", got)
	}
	if after := rng.Uint64(); after != rand.New(rand.NewPCG(3, 4)).Uint64() {
		t.Error("no noise drew a random number")
	}
}

// formulaFactor is the log-normal factor of mean 1 and relative spread
// cv, written out.
func formulaFactor(cv float64, rng *rand.Rand) float64 {
	if cv <= 0 {
		return 1
	}
	sigma := math.Sqrt(math.Log1p(cv * cv))
	return math.Exp(sigma*rng.NormFloat64() - sigma*sigma/2)
}
