package trace

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Every bound is checked before the trace is built: none of these may
// allocate the per-second slice they describe.
func TestGenerateRejectsTracesBeyondTheBoundsBeforeAllocating(t *testing.T) {
	cases := []struct {
		rate float64
		d    time.Duration
	}{
		{1e9, time.Minute},         // the rate
		{1e308, time.Second},       // the rate, absurdly
		{10, 100000 * time.Hour},   // the duration
		{MaxRate, MaxDuration},     // the total
		{2000, 7 * 24 * time.Hour}, // 1.2e9 requests
	}
	for _, c := range cases {
		// Bytes, not allocation counts: the error's formatting allocates a
		// varying number of small objects (more under -race), while the
		// slice these bounds guard would be megabytes at least.
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Generate("poisson", c.rate, c.d, 1)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("rate %v over %v: got %v, want ErrTooLarge", c.rate, c.d, err)
		}
		if b := after.TotalAlloc - before.TotalAlloc; b > 64<<10 {
			t.Errorf("rate %v over %v: %d bytes allocated before the error", c.rate, c.d, b)
		}
	}
	if _, err := Generate("twitter", 1000, 24*time.Hour, 1); err != nil {
		t.Errorf("86.4M requests over a day is within bounds: %v", err)
	}
}

func TestValidateHoldsABuiltTraceToTheBounds(t *testing.T) {
	tr, err := Generate("poisson", 100, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.ScaleToPeak(2 * MaxRate).Validate(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("peak above MaxRate: %v", err)
	}
	if err := tr.Scale(1e6).Validate(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("6e9 requests: %v", err)
	}
}

func TestReadersRejectFilesBeyondTheBounds(t *testing.T) {
	huge := strings.Repeat("1\n", maxSeconds+1)
	cases := map[string]string{
		"count 1e308":           "1e308\n",
		"count above MaxRate":   fmt.Sprintf("%v\n", 2*MaxRate),
		"timed count 1e308":     "0,1\n1,1e308\n",
		"more than a week":      huge,
		"total above the bound": strings.Repeat("999999\n", 1001),
	}
	for name, in := range cases {
		_, err := ReadCSV(strings.NewReader(in))
		if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: got %v, want a malformed-file error (exit code 1, not a usage error)", name, err)
		} else if !strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: %v does not name the line", name, err)
		}
	}
	_, err := ReadAzure(strings.NewReader(azureFile(azureRow("f", func(int) int { return math.MaxInt32 }))), "")
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("azure minute of 2^31 requests: %v", err)
	}
	row := azureRow("f", func(int) int { return 50_000_000 }) // below the per-minute bound, 7.2e10 in all
	if _, err := ReadAzure(strings.NewReader(azureFile(row)), ""); !errors.Is(err, ErrMalformed) {
		t.Errorf("azure total of 7.2e10: %v", err)
	}
}

// checkRead is what every successful read must satisfy, whatever the input.
func checkRead(t *testing.T, tr Trace, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v is not ErrMalformed", err)
		}
		return
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("read a trace that does not validate: %v", err)
	}
	if len(tr.PerSecond) > maxSeconds || tr.Total() > MaxRequests || tr.Peak() > MaxRate {
		t.Fatalf("read a trace beyond the bounds: %d s, %v requests, peak %v", len(tr.PerSecond), tr.Total(), tr.Peak())
	}
}

func FuzzReadCSV(f *testing.F) {
	for _, s := range []string{"1\n2\n3\n", "second,count\n0,1\n5,2\n", "# c\n\n1e308\n", "0,1\n0,2\n", "x\ny\n", "1,2,3\n", "604800,1\n0,1\n", "0,1\n604799,1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadCSV(strings.NewReader(in))
		checkRead(t, tr, err)
	})
}

func FuzzReadAzure(f *testing.F) {
	f.Add(azureFile(azureRow("f", func(i int) int { return i })), "f")
	f.Add(azureFile(azureRow("f", func(int) int { return 1 }), azureRow("g", func(int) int { return 2 })), "")
	f.Add("HashOwner,HashApp,HashFunction,Trigger\n", "")
	f.Add("HashOwner\na,b,c,d,1e308\n", "c")
	f.Fuzz(func(t *testing.T, in, fn string) {
		tr, err := ReadAzure(strings.NewReader(in), fn)
		checkRead(t, tr, err)
	})
}
