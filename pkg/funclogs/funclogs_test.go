package funclogs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// clock is a fake clock a second a reading.
func clock() func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

func TestWriterCutsLinesAndBoundsThem(t *testing.T) {
	h := New(clock())
	w := h.Writer("f", "f-1")
	fmt.Fprint(w, "hel")
	fmt.Fprint(w, "lo\nwor")
	fmt.Fprint(w, "ld\n"+strings.Repeat("é", MaxLine)+"\nlast")
	w.Close()
	got := h.Lines(Query{Function: "f"})
	if len(got) != 4 || got[0].Text != "hello" || got[1].Text != "world" || got[3].Text != "last" {
		t.Fatalf("lines %q", got)
	}
	if long := got[2].Text; !strings.HasSuffix(long, Truncated) || len(long) > MaxLine+len(Truncated) || !strings.HasPrefix(long, "éé") {
		t.Fatalf("long line: %d bytes, %q...", len(long), long[:20])
	}
	if !got[0].Time.Before(got[1].Time) {
		t.Fatalf("times %v %v", got[0].Time, got[1].Time)
	}
}

func TestRingKeepsTheNewestWithinItsBounds(t *testing.T) {
	h := New(clock())
	w := h.Writer("f", "f-1")
	for i := range MaxLines + 10 {
		fmt.Fprintf(w, "%d\n", i)
	}
	got := h.Lines(Query{Function: "f"})
	if len(got) != MaxLines || got[0].Text != "10" || got[len(got)-1].Text != fmt.Sprint(MaxLines+9) {
		t.Fatalf("%d lines, %q to %q", len(got), got[0].Text, got[len(got)-1].Text)
	}
	big := strings.Repeat("x", MaxLine-1)
	for range 2 * MaxBytes / MaxLine {
		fmt.Fprintln(w, big)
	}
	bytes := 0
	for _, l := range h.Lines(Query{Function: "f"}) {
		bytes += len(l.Text) + len(l.Instance)
	}
	if bytes > MaxBytes {
		t.Fatalf("%d bytes kept, bound %d", bytes, MaxBytes)
	}
	if tail := h.Lines(Query{Function: "f", Tail: 3}); len(tail) != 3 {
		t.Fatalf("tail 3: %d", len(tail))
	}
}

func TestQueryFiltersByInstanceAndSince(t *testing.T) {
	h := New(clock())
	a, b := h.Writer("f", "f-1"), h.Writer("f", "f-2")
	fmt.Fprintln(a, "a1")
	fmt.Fprintln(b, "b1")
	fmt.Fprintln(a, "a2")
	all := h.Lines(Query{Function: "f"})
	if got := h.Lines(Query{Function: "f", Instance: "f-1"}); len(got) != 2 || got[1].Text != "a2" {
		t.Fatalf("instance f-1: %v", got)
	}
	if got := h.Lines(Query{Function: "f", Since: all[1].Time}); len(got) != 2 || got[0].Text != "b1" {
		t.Fatalf("since the second: %v", got)
	}
}

func TestFollowersGetNewLinesAndASlowOneIsCutOff(t *testing.T) {
	h := New(clock())
	w := h.Writer("f", "f-1")
	fmt.Fprintln(w, "old")
	kept, f, err := h.Follow(Query{Function: "f"})
	if err != nil || len(kept) != 1 {
		t.Fatalf("follow: %v %v", kept, err)
	}
	fmt.Fprintln(w, "new")
	if l := <-f.C(); l.Text != "new" {
		t.Fatalf("followed %q", l.Text)
	}
	for range followBuffer + 1 {
		fmt.Fprintln(w, "flood")
	}
	n := 0
	for range f.C() {
		n++
	}
	if n != followBuffer || !strings.Contains(f.Reason(), "behind") {
		t.Fatalf("a lagging follower got %d lines and reason %q", n, f.Reason())
	}
	var fs []*Follower
	for range MaxFollowers {
		_, f, err := h.Follow(Query{Function: "f"})
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	if _, _, err := h.Follow(Query{Function: "f"}); !errors.Is(err, ErrTooManyFollowers) {
		t.Fatalf("past the bound: %v", err)
	}
	h.Stop(fs[0])
	if _, _, err := h.Follow(Query{Function: "f"}); err != nil {
		t.Fatalf("after a Stop: %v", err)
	}
	h.Close()
	for _, f := range fs[1:] {
		if _, ok := <-f.C(); ok {
			t.Fatal("a follower outlived Close")
		}
	}
}

// BenchmarkWriterLine is the cost of one 100-byte line an instance prints,
// into a full ring with one follower.
func BenchmarkWriterLine(b *testing.B) {
	h := New(nil)
	w := h.Writer("f", "f-1")
	_, f, _ := h.Follow(Query{Function: "f"})
	go func() {
		for range f.C() {
		}
	}()
	line := []byte(strings.Repeat("x", 99) + "\n")
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = w.Write(line)
	}
}

// An instance is known from its start (before it prints), by its kept
// lines, and forgotten with its function.
func TestKnownInstance(t *testing.T) {
	h := New(nil)
	w := h.Writer("f", "f-1")
	if !h.KnownInstance("f", "f-1") || h.KnownInstance("f", "f-2") || h.KnownInstance("g", "f-1") {
		t.Fatal("a started instance must be known, and only it")
	}
	fmt.Fprintln(w, "hello")
	h.Drop("f")
	if h.KnownInstance("f", "f-1") {
		t.Fatal("a dropped function's instance is still known")
	}
	h.add(Line{Function: "f", Instance: "f-9", Text: "kept"})
	if !h.KnownInstance("f", "f-9") {
		t.Fatal("an instance with lines kept must be known")
	}
	for i := range MaxInstanceNames + 1 {
		h.Writer("g", fmt.Sprintf("g-%d", i))
	}
	if !h.KnownInstance("g", "g-0") || !h.KnownInstance("g", fmt.Sprintf("g-%d", MaxInstanceNames)) {
		t.Fatal("past the bound the record cannot tell and must say yes")
	}
}
