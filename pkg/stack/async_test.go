package stack

import (
	"errors"
	"testing"
	"time"
)

func TestAsyncDeadline(t *testing.T) {
	s, err := Parse("stack.yml", []byte(`
functions:
  a:
    fprocess: cat
  b:
    fprocess: cat
    slo: 2s
    async_deadline: 5m
  c:
    fprocess: cat
    slo: 2m
  d:
    fprocess: cat
    annotations:
      gantry.dev/async-deadline: 30s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"a": DefaultAsyncDeadline, "b": 5 * time.Minute, "c": 2 * time.Minute, "d": 30 * time.Second}
	for _, f := range s.Functions {
		if f.AsyncDeadline != want[f.Name] {
			t.Errorf("%s: async deadline %v, want %v", f.Name, f.AsyncDeadline, want[f.Name])
		}
	}
	for _, bad := range []string{"slo: 2s\n    async_deadline: 1s", "async_deadline: 48h", "async_deadline: soon"} {
		if _, err := Parse("stack.yml", []byte("functions:\n  a:\n    fprocess: cat\n    "+bad+"\n")); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: err %v, want ErrInvalid", bad, err)
		}
	}
}
