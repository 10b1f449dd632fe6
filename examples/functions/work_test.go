package functions

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// inputs makes an input of about n bytes for each real function, the way
// the chain would hand it over.
var inputs = map[string]func(n int, rng *rand.Rand) []byte{
	"image-compress": func(n int, rng *rand.Rand) []byte { b, _, _ := genImage(n, rng); return b },
	"sentiment":      func(n int, rng *rand.Rand) []byte { b, _, _ := genReview(n, rng); return b },
	"email-parse":    func(n int, rng *rand.Rand) []byte { b, _, _ := genEmail(n, rng); return b },
	"email-categorize": func(n int, rng *rand.Rand) []byte {
		b, _, _ := genEmail(n, rng)
		text, _ := parseEmail(b)
		return []byte(text)
	},
	"speech-to-text": func(n int, rng *rand.Rand) []byte { b, _ := synthSpeech(n, rng); return b },
	"translate": func(n int, rng *rand.Rand) []byte {
		var b strings.Builder
		return []byte(fillTo(&b, n, rng, speechVocabulary, 1))
	},
	"send-message": func(n int, rng *rand.Rand) []byte {
		var b strings.Builder
		return []byte(fillTo(&b, n, rng, nil, 0))
	},
	"pdf-extract": func(n int, rng *rand.Rand) []byte { b, _ := synthPDF(n, rng); return b },
	"summarize": func(n int, rng *rand.Rand) []byte {
		_, lines := synthPDF(n, rng)
		return []byte(strings.Join(lines, "\n"))
	},
}

// runDirect calls a function without HTTP, to read the work it reports.
func runDirect(t testing.TB, name string, body []byte) result {
	t.Helper()
	s, ok := lookup(name)
	if !ok {
		t.Fatalf("no function %s", name)
	}
	run, err := s.build(options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(t.Context(), request{body: body})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// Work, counted in the unit each function's cost follows (pixels, samples,
// words, bytes), grows in proportion to the input; send-message does the
// same work for any size. Counting work instead of timing keeps the test
// deterministic on a loaded machine.
func TestWorkFollowsInputSize(t *testing.T) {
	for name, input := range inputs {
		small, large := 32<<10, 128<<10
		if name == "image-compress" {
			small, large = 64<<10, 256<<10 // above the JPEG's fixed overhead
		}
		ws := runDirect(t, name, input(small, testRand())).work
		wl := runDirect(t, name, input(large, testRand())).work
		ratio := float64(wl) / float64(ws)
		a, _ := Describe(name)
		sensitive := name != "send-message"
		switch {
		case ws <= 0:
			t.Errorf("%s: no work reported", name)
		case sensitive && (ratio < 3 || ratio > 5):
			t.Errorf("%s (%s): work %d at %d bytes, %d at %d: ratio %.2f, want about 4",
				name, a.InUnit, ws, small, wl, large, ratio)
		case !sensitive && ratio != 1:
			t.Errorf("%s: work %d then %d, want the same for every size", name, ws, wl)
		}
	}
}

// Every real function has a work input above, so none is left untested.
func TestEveryRealFunctionHasAWorkInput(t *testing.T) {
	for name := range registry {
		if _, ok := inputs[name]; !ok && name != replayName {
			t.Errorf("%s has no input in the work test", name)
		}
	}
}

// BenchmarkFunctions times each function at two input sizes, for reading
// how run time grows (go test -bench Functions ./examples/functions).
func BenchmarkFunctions(b *testing.B) {
	for name, input := range inputs {
		for _, n := range []int{64 << 10, 512 << 10} {
			b.Run(fmt.Sprintf("%s/%dKB", name, n>>10), func(b *testing.B) {
				body := input(n, testRand())
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					runDirect(b, name, body)
				}
			})
		}
	}
}
