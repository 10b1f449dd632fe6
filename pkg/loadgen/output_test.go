package loadgen

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleResult() *Result {
	return &Result{
		Requests: 3, OK: 2, Errors: 1, ErrorsByKind: map[string]int64{KindClientOverload: 1},
		SLO: 100 * time.Millisecond, SLOCompliance: 2.0 / 3, P50: 10 * time.Millisecond, Max: 30 * time.Millisecond, Measured: 2,
		Duration: 2 * time.Second, Throughput: 1,
		Timeline: []Second{{Sent: 2, OK: 2, MeanLatency: 20 * time.Millisecond, MaxLatency: 30 * time.Millisecond}, {Sent: 1, Errors: 1}},
	}
}

func TestCSVWriterWritesOneRowPerSample(t *testing.T) {
	var buf bytes.Buffer
	w := NewCSVWriter(&buf)
	w.Write(Sample{Offset: 1500 * time.Microsecond, Size: 2, Latency: 12345 * time.Microsecond, Measured: true, Status: 200, Kind: KindOK})
	w.Write(Sample{Offset: 2 * time.Second, Size: 3, Kind: KindClientOverload})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{CSVHeader, {"1.5", "12.345", "200", "ok", "2"}, {"2000", "", "0", "client_overload", "3"}}
	if len(rows) != len(want) {
		t.Fatalf("rows %v", rows)
	}
	for i := range want {
		if strings.Join(rows[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("row %d: %v, want %v", i, rows[i], want[i])
		}
	}
}

func TestWritePlotDrawsAPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latency.png")
	if err := WritePlot(path, sampleResult()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("%s is not a PNG", path)
	}
	// Nothing measured still draws (an empty plot), rather than failing
	// at the end of a run that only saw errors.
	if err := WritePlot(path, &Result{Timeline: make([]Second, 3)}); err != nil {
		t.Errorf("empty timeline: %v", err)
	}
}

func TestWriteTableNamesEveryErrorKind(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteText(&buf, sampleResult()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"requests", "client_overload", "66.67%", "p99"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

// The latency line says which requests it covers: failed ones with a
// latency are counted there and said to be.
func TestWriteTextSaysFailedRequestsAreInTheLatencies(t *testing.T) {
	r := sampleResult()
	var buf bytes.Buffer
	if err := WriteText(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "2 requests") || !strings.Contains(buf.String(), "all OK") {
		t.Errorf("all-OK latencies:\n%s", buf.String())
	}
	r.Measured, r.Errors, r.ErrorsByKind = 3, 2, map[string]int64{KindClientOverload: 1, KindTimeout: 1}
	buf.Reset()
	if err := WriteText(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "3 requests") || !strings.Contains(buf.String(), "2 OK and 1 failed") {
		t.Errorf("latencies with a failed request:\n%s", buf.String())
	}
}
