package stack

import (
	"errors"
	"testing"
)

// slo_target (percent) is read from the stack file and from the API's
// annotation; a value outside (0, 100) is refused with the reason.
func TestSLOTarget(t *testing.T) {
	s, err := Parse("stack.yml", []byte(`
functions:
  a:
    fprocess: cat
  b:
    fprocess: cat
    slo_target: 99.99
  c:
    fprocess: cat
    annotations:
      gantry.dev/slo-target: "99.5"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"a": 0, "b": 99.99, "c": 99.5}
	for _, f := range s.Functions {
		if f.SLOTarget != want[f.Name] {
			t.Errorf("%s: slo_target %v, want %v", f.Name, f.SLOTarget, want[f.Name])
		}
	}
	for _, bad := range []string{"slo_target: 100", "slo_target: -1", "slo_target: 0.999", "annotations:\n      gantry.dev/slo-target: most"} {
		if _, err := Parse("stack.yml", []byte("functions:\n  a:\n    fprocess: cat\n    "+bad+"\n")); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: err %v, want ErrInvalid", bad, err)
		}
	}
}
