package gateway

import (
	"net/http"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/stack"
)

// The input size is the declared header's; without it, the body's length
// clamped to the function's size range (../shared/conventions.md); a bad
// header is refused.
func TestInputSizeFromHeaderOrBody(t *testing.T) {
	withHeader := stack.Function{Name: "f", SizeHeader: "X-Input-Size", MinSize: 4, MaxSize: 64}
	plain := stack.Function{Name: "g"}
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
		{plain, "", 0, 1, false, ""},
		{plain, "9", 300, 300, false, ""},
	} {
		got, fail := inputSize(tc.decl, h(tc.header), tc.body)
		if (fail != nil) != tc.refused || (!tc.refused && got != tc.want) || (fail != nil && !strings.Contains(fail.err.Error(), tc.why)) {
			t.Errorf("%s header %q body %d: size %v, failure %v; want %v, refused %v", tc.decl.Name, tc.header, tc.body, got, fail, tc.want, tc.refused)
		}
	}
}
