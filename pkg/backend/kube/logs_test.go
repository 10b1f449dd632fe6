package kube

import (
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/funclogs"
)

// A pod log's "TIMESTAMP TEXT" lines are read with their times; a line
// past funclogs.MaxLine is cut and marked, as the gateway's rings cut
// them, and the next line is read whole.
func TestScanPodLogReadsStampsAndCutsLongLines(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	in := "2026-12-01T02:00:00.123456789Z hello world\n" +
		"2026-12-01T02:00:01Z " + long + "\n" +
		"not stamped\n" +
		"2026-12-01T02:00:02Z last"
	type got struct {
		t    time.Time
		text string
	}
	var out []got
	if err := scanPodLog(strings.NewReader(in), func(t time.Time, s string) error {
		out = append(out, got{t, s})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 {
		t.Fatalf("%d lines", len(out))
	}
	if want := time.Date(2026, 12, 1, 2, 0, 0, 123456789, time.UTC); !out[0].t.Equal(want) || out[0].text != "hello world" {
		t.Fatalf("first: %+v", out[0])
	}
	if len(out[1].text) != funclogs.MaxLine+len(funclogs.Truncated) || !strings.HasSuffix(out[1].text, funclogs.Truncated) {
		t.Fatalf("long line of %d bytes", len(out[1].text))
	}
	if out[2].text != "not stamped" || out[2].t.IsZero() {
		t.Fatalf("unstamped: %+v", out[2])
	}
	if out[3].text != "last" {
		t.Fatalf("last: %+v", out[3])
	}
}
