package trace

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Cypress section 5: Wiki peak:mean is 331:302 and Twitter 5450:3139.
func TestGeneratedTracesMatchThePaperPeakToMean(t *testing.T) {
	cases := []struct {
		name string
		want float64
	}{{"wiki", 1.1}, {"twitter", 1.74}, {"poisson", 1}}
	for _, c := range cases {
		for _, seed := range []uint64{1, 2, 3, 42} {
			for _, d := range []time.Duration{10 * time.Minute, time.Hour} {
				tr, err := Generate(c.name, 250, d, seed)
				if err != nil {
					t.Fatal(err)
				}
				ratio := tr.Peak() / tr.Mean()
				if math.Abs(ratio-c.want) > 0.02 {
					t.Errorf("%s seed %d %v: peak:mean %.3f, want %.2f", c.name, seed, d, ratio, c.want)
				}
				if math.Abs(tr.Mean()-250) > 1e-6 {
					t.Errorf("%s: mean %.3f, want 250", c.name, tr.Mean())
				}
				if tr.Duration() != d {
					t.Errorf("%s: duration %v, want %v", c.name, tr.Duration(), d)
				}
			}
		}
	}
}

// The wiki trace is smooth (small second-to-second change) and twitter is
// bursty (large jumps), which is what separates the two in the paper.
func TestWikiIsSmoothAndTwitterIsBursty(t *testing.T) {
	wiki, _ := Generate("wiki", 100, time.Hour, 5)
	tw, _ := Generate("twitter", 100, time.Hour, 5)
	if j := maxJump(wiki); j > 5 {
		t.Errorf("wiki max 1-s jump %.1f rps, want smooth", j)
	}
	if j := maxJump(tw); j < 10 {
		t.Errorf("twitter max 1-s jump %.1f rps, want bursty", j)
	}
	for _, v := range tw.PerSecond {
		if v < 0 {
			t.Fatal("negative rate")
		}
	}
}

func maxJump(tr Trace) float64 {
	m := 0.0
	for i := 1; i < len(tr.PerSecond); i++ {
		m = max(m, math.Abs(tr.PerSecond[i]-tr.PerSecond[i-1]))
	}
	return m
}

func TestGenerateIsDeterministicGivenSeed(t *testing.T) {
	for _, name := range Names() {
		a, _ := Generate(name, 50, 30*time.Minute, 9)
		b, _ := Generate(name, 50, 30*time.Minute, 9)
		if !slices.Equal(a.PerSecond, b.PerSecond) {
			t.Errorf("%s: same seed, different traces", name)
		}
	}
	a, _ := Generate("twitter", 50, 30*time.Minute, 9)
	c, _ := Generate("twitter", 50, 30*time.Minute, 10)
	if slices.Equal(a.PerSecond, c.PerSecond) {
		t.Error("twitter: different seeds gave the same trace")
	}
}

func TestScaleToPeakHitsThePeakAndKeepsTheShape(t *testing.T) {
	tr, _ := Generate("twitter", 3139, 20*time.Minute, 1)
	big := tr.ScaleToPeak(5450)
	if math.Abs(big.Peak()-5450) > 1e-6 {
		t.Fatalf("peak %.2f, want 5450", big.Peak())
	}
	ratioBefore, ratioAfter := tr.Peak()/tr.Mean(), big.Peak()/big.Mean()
	if math.Abs(ratioBefore-ratioAfter) > 1e-9 {
		t.Errorf("peak:mean changed from %.4f to %.4f", ratioBefore, ratioAfter)
	}
	if tr.PerSecond[0] == big.PerSecond[0] && tr.Peak() != 5450 {
		t.Error("ScaleToPeak modified the receiver or did nothing")
	}
}

func TestGenerateRejectsBadInput(t *testing.T) {
	cases := []struct {
		name string
		rate float64
		d    time.Duration
		want error
	}{
		{"zipf", 1, time.Minute, ErrUnknownTrace},
		{"poisson", 0, time.Minute, ErrBadRate},
		{"poisson", -3, time.Minute, ErrBadRate},
		{"poisson", math.NaN(), time.Minute, ErrBadRate},
		{"wiki", 10, 0, ErrBadDuration},
		{"wiki", 10, -time.Second, ErrBadDuration},
		{"wiki", 10, 500 * time.Millisecond, ErrBadDuration},
	}
	for _, c := range cases {
		_, err := Generate(c.name, c.rate, c.d, 1)
		if !errors.Is(err, c.want) {
			t.Errorf("Generate(%q, %v, %v) = %v, want %v", c.name, c.rate, c.d, err, c.want)
		}
	}
}

func TestReadCSV(t *testing.T) {
	cases := []struct {
		in   string
		want []float64
	}{
		{"5\n7\n0\n2.5\n", []float64{5, 7, 0, 2.5}},
		{"count\n# comment\n\n3\n4\n", []float64{3, 4}},
		{"second,count\n10,1\n11,2\n14,3\n", []float64{1, 2, 0, 0, 3}},
		{"0, 4\r\n1, 6\r\n", []float64{4, 6}},
	}
	for _, c := range cases {
		tr, err := ReadCSV(strings.NewReader(c.in))
		if err != nil {
			t.Errorf("ReadCSV(%q): %v", c.in, err)
			continue
		}
		if !slices.Equal(tr.PerSecond, c.want) {
			t.Errorf("ReadCSV(%q) = %v, want %v", c.in, tr.PerSecond, c.want)
		}
	}
}

func TestReadCSVErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		in   string
		line string
	}{
		{"1\n2\nabc\n", "line 3"},
		{"count\n1\n-4\n", "line 3"},
		{"1\n\n# c\n2,3\n", "line 4"},
		{"0,1\n1,2\n1,3\n", "line 3"},
		{"0,1\n1,NaN\n", "line 2"},
		{"0,1\n1,+Inf\n", "line 2"},
		{"0,1\n999999999,1\n", "line 2"},
		{"x,1\n", "line 1"},
	}
	for _, c := range cases {
		_, err := ReadCSV(strings.NewReader(c.in))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.line+":") {
			t.Errorf("ReadCSV(%q) = %v, want ErrMalformed naming %s", c.in, err, c.line)
		}
	}
	for _, in := range []string{"", "count\n", "0\n0\n"} {
		if _, err := ReadCSV(strings.NewReader(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ReadCSV(%q) = %v, want ErrMalformed for a trace with no load", in, err)
		}
	}
}

func azureFile(rows ...string) string {
	var b strings.Builder
	b.WriteString("HashOwner,HashApp,HashFunction,Trigger")
	for i := 1; i <= azureMinutes; i++ {
		fmt.Fprintf(&b, ",%d", i)
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	return b.String()
}

func azureRow(fn string, perMinute func(i int) int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "o,a,%s,http", fn)
	for i := range azureMinutes {
		fmt.Fprintf(&b, ",%d", perMinute(i))
	}
	return b.String()
}

func TestReadAzureSpreadsEachMinuteOverItsSeconds(t *testing.T) {
	in := azureFile(
		azureRow("f1", func(i int) int { return 60 * (i % 3) }),
		azureRow("f2", func(int) int { return 6000 }),
		azureRow("f1", func(int) int { return 120 }),
	)
	tr, err := ReadAzure(strings.NewReader(in), "f1")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Duration() != 24*time.Hour {
		t.Fatalf("duration %v, want 24h", tr.Duration())
	}
	// minute 0: 0+120, minute 1: 60+120, minute 2: 120+120 arrivals.
	for i, want := range []float64{2, 3, 4} {
		for s := range 60 {
			if got := tr.PerSecond[i*60+s]; got != want {
				t.Fatalf("minute %d second %d: %v, want %v", i, s, got, want)
			}
		}
	}
	all, err := ReadAzure(strings.NewReader(in), "")
	if err != nil || all.PerSecond[0] != 102 {
		t.Errorf("all functions: %v, first second %v, want 102", err, all.PerSecond[0])
	}
}

func TestReadAzureRejectsBadInput(t *testing.T) {
	good := azureRow("f1", func(int) int { return 1 })
	cases := []struct {
		in, fn, want string
	}{
		{"a,b,c\n" + good, "f1", "line 1"},
		{azureFile("o,a,f1,http,1,2"), "f1", "line 2"},
		{azureFile(good, strings.Replace(good, ",1,", ",x,", 1)), "f1", "line 3"},
		{azureFile(good), "f9", "no row"},
	}
	for _, c := range cases {
		_, err := ReadAzure(strings.NewReader(c.in), c.fn)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadAzure: %v, want ErrMalformed mentioning %q", err, c.want)
		}
	}
}

func TestReadFileTellsTheFormats(t *testing.T) {
	dir := t.TempDir()
	csvPath := dir + "/load.csv"
	azPath := dir + "/azure.csv"
	badPath := dir + "/bad.csv"
	writeFile(t, csvPath, "second,count\n0,3\n1,4\n")
	writeFile(t, azPath, azureFile(azureRow("f1", func(int) int { return 60 })))
	writeFile(t, badPath, "1\n2\nthree\n")
	tr, err := ReadFile(csvPath, "")
	if err != nil || tr.Name != "load" || !slices.Equal(tr.PerSecond, []float64{3, 4}) {
		t.Errorf("csv: %v %+v", err, tr)
	}
	tr, err = ReadFile(azPath, "f1")
	if err != nil || tr.Name != "azure" || tr.Duration() != 24*time.Hour || tr.PerSecond[5] != 1 {
		t.Errorf("azure: %v %v %v", err, tr.Name, tr.Duration())
	}
	_, err = ReadFile(badPath, "")
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "bad.csv") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad file: %v, want the path and line 3", err)
	}
	if _, err := ReadFile(dir+"/missing.csv", ""); err == nil {
		t.Error("missing file: no error")
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
