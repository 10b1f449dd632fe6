package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/stack"
)

// The input size is the declared header's; without it, the body's length
// converted to the function's unit and clamped to its size range (../shared/conventions.md); a bad
// header is refused.
func TestInputSizeFromHeaderOrBody(t *testing.T) {
	withHeader := stack.Function{Name: "f", SizeHeader: "X-Input-Size", MinSize: 4, MaxSize: 64}
	plain := stack.Function{Name: "g"}
	inKB := stack.Function{Name: "k", SizeHeader: "X-Input-Size", SizeUnit: stack.SizeUnitKB, MinSize: 0.01, MaxSize: 64}
	inMBNoHeader := stack.Function{Name: "m", SizeUnit: stack.SizeUnitMB, MinSize: 0.5, MaxSize: 8}
	h := func(v string) http.Header {
		hd := http.Header{}
		if v != "" {
			hd.Set("X-Input-Size", v)
		}
		return hd
	}
	for _, tc := range []struct {
		decl    stack.Function
		header  string
		body    int
		want    float64
		refused bool
		why     string
	}{
		{withHeader, "7.5", 1000, 7.5, false, ""},
		{withHeader, "", 26, 26, false, ""},
		{withHeader, "", 1, 4, false, ""},
		{withHeader, "", 1 << 20, 64, false, ""},
		{withHeader, "-3", 10, 0, true, "is not positive"},
		{withHeader, "abc", 10, 0, true, "is not a number"},
		{withHeader, "NaN", 10, 0, true, "is not a number"},
		{withHeader, "1e308", 10, 0, true, "is too large: an input size is at most 1e+300"},
		{withHeader, "1e400", 10, 0, true, "is too large"},
		{withHeader, "Inf", 10, 0, true, "is too large"},
		{withHeader, "1e-400", 10, 0, true, "is not positive (it is 0"},
		{withHeader, "1e300", 10, 1e300, false, ""},
		{inKB, "", 26, 26.0 / 1024, false, ""},
		{inKB, "", 1, 0.01, false, ""},
		{inKB, "", 1 << 20, 64, false, ""},
		{inKB, "", 4096, 4, false, ""},
		{inKB, "2", 4096, 2, false, ""},
		{inMBNoHeader, "", 3 << 19, 1.5, false, ""},
		{inMBNoHeader, "7", 3 << 19, 1.5, false, ""},
		{plain, "", 0, 1, false, ""},
		{plain, "9", 300, 300, false, ""},
	} {
		got, fail := inputSize(tc.decl, h(tc.header), tc.body)
		if (fail != nil) != tc.refused || (!tc.refused && got != tc.want) || (fail != nil && !strings.Contains(fail.err.Error(), tc.why)) {
			t.Errorf("%s header %q body %d: size %v, failure %v; want %v, refused %v", tc.decl.Name, tc.header, tc.body, got, fail, tc.want, tc.refused)
		}
	}
}

// input_size.unit travels over the OpenFaaS API as gantry.dev/size-unit;
// a unit that is not B, KB or MB is refused with the reason.
func TestDeploySizeUnitAnnotation(t *testing.T) {
	srv := startGateway(t, &stack.Stack{}, nil)
	f := instanceFunction(t, "x", "upper")
	deploy := func(name, unit string) (int, string) {
		dep, _ := json.Marshal(map[string]any{"service": name, "envProcess": f.Command, "envVars": f.Env,
			"annotations": map[string]string{"gantry.dev/size-unit": unit, "gantry.dev/size-range": "0.5-64",
				"gantry.dev/size-sensitive": "false"}})
		code, body, _ := do(t, "POST", srv.URL()+"/system/functions", string(dep), nil)
		return code, body
	}
	if code, body := deploy("bad", "GB"); code != http.StatusBadRequest || !strings.Contains(body, "gantry.dev/size-unit") || !strings.Contains(body, "B, KB, MB") {
		t.Fatalf("unit GB: %d %q, want 400 naming the annotation and the units", code, body)
	}
	if code, body := deploy("kb", "KB"); code != http.StatusAccepted {
		t.Fatalf("unit KB: %d %q", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/kb", "hi", nil); code != 200 || body != "HI" {
		t.Fatalf("invoke: %d %q", code, body)
	}
}
