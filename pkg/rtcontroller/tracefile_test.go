package rtcontroller

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A benchmark in another process reads the traces back: each is one JSON
// line with its times on the wall clock, in the order they were added;
// a trace added after Close is counted as dropped, not written or sent on
// a closed channel.
func TestTraceFileWritesOneJSONLinePerTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.jsonl")
	tf, err := OpenTraceFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := time.Date(2026, 12, 2, 7, 0, 0, 123456789, time.UTC)
	for gen := int64(1); gen <= 3; gen++ {
		tf.Add(ReconcileTrace{Namespace: "ns", Name: "svc", Generation: gen, Seen: seen,
			Start: seen.Add(time.Millisecond), Mark: CallTrace{Limiter: 2 * time.Millisecond, API: 5 * time.Millisecond}})
	}
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	tf.Add(ReconcileTrace{Name: "late"})
	if tf.Dropped() != 1 {
		t.Errorf("dropped %d, want the one added after Close", tf.Dropped())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []ReconcileTrace
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var tr ReconcileTrace
		if err := json.Unmarshal(sc.Bytes(), &tr); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, tr)
	}
	if len(got) != 3 {
		t.Fatalf("%d lines, want 3", len(got))
	}
	for i, tr := range got {
		if tr.Generation != int64(i+1) || !tr.Seen.Equal(seen) || tr.Start.Sub(tr.Seen) != time.Millisecond ||
			tr.Mark.Limiter != 2*time.Millisecond || tr.Mark.API != 5*time.Millisecond {
			t.Errorf("line %d: %+v", i, tr)
		}
	}
}
