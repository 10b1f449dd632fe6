package functions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/workload"
)

// mustHandler builds a function's handler or fails the test.
func mustHandler(t testing.TB, name string, opts ...Option) http.Handler {
	t.Helper()
	h, err := Handler(name, opts...)
	if err != nil {
		t.Fatalf("Handler(%q): %v", name, err)
	}
	return h
}

// post sends body to h in-process, as the gateway would.
func post(h http.Handler, body []byte, header http.Header) *httptest.ResponseRecorder {
	return postQuery(h, "/", body, header)
}

func postQuery(h http.Handler, target string, body []byte, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	maps.Copy(req.Header, header)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// postOK posts and fails unless the answer is 200 with a valid X-Output-Size.
func postOK(t testing.TB, h http.Handler, body []byte, header http.Header) (*httptest.ResponseRecorder, float64) {
	t.Helper()
	rec := post(h, body, header)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", rec.Code, rec.Body)
	}
	out, err := strconv.ParseFloat(rec.Header().Get(HeaderOutputSize), 64)
	if err != nil {
		t.Fatalf("X-Output-Size %q: %v", rec.Header().Get(HeaderOutputSize), err)
	}
	return rec, out
}

func decodeJSON[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func testRand() *rand.Rand { return rand.New(rand.NewPCG(42, 43)) }

// Every function of every app's chain in pkg/workload can be served under
// its own name, so a stack file can use the simulator's names throughout.
func TestEveryChainFunctionIsServed(t *testing.T) {
	names := Names()
	for _, appName := range workload.Names() {
		app, err := workload.Lookup(appName)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range app.Chain {
			if !slices.Contains(names, f.Name) {
				t.Errorf("%s/%s has no function; Names() = %v", appName, f.Name, names)
				continue
			}
			a, err := Describe(f.Name)
			if err != nil {
				t.Fatal(err)
			}
			if want := appName + "/" + f.Name; !slices.Contains(a.Serves, want) {
				t.Errorf("Describe(%q).Serves = %v, want it to list %s", f.Name, a.Serves, want)
			}
			if a.InUnit != app.SizeUnit {
				t.Errorf("%s takes %s, but %s sizes are in %s", f.Name, a.InUnit, appName, app.SizeUnit)
			}
		}
	}
	for _, want := range []string{"image-compress", "sentiment", "email-categorize", "speech-to-text", "translate", "send-message", "replay"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() lacks %s", want)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("Names() is not sorted: %v", names)
	}
}

func TestDescribeAliases(t *testing.T) {
	a, err := Describe("text-translate")
	if err != nil || a.AliasOf != "translate" || a.Name != "text-translate" {
		t.Errorf("Describe(text-translate) = %+v, %v; want an alias of translate", a, err)
	}
	if a, _ := Describe("translate"); a.AliasOf != "" {
		t.Errorf("translate is an alias of %q", a.AliasOf)
	}
	if _, err := Describe("nope"); !errors.Is(err, ErrUnknownFunction) {
		t.Errorf("Describe(nope) = %v, want ErrUnknownFunction", err)
	}
}

func TestHandlerRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opts []Option
		want error
	}{
		{"nope", nil, ErrUnknownFunction},
		{"sentiment", []Option{WithReplay("sentiment-analysis", "sentiment", 1)}, ErrBadOption},
		{"sentiment", []Option{WithMaxBody(0)}, ErrBadOption},
		{"replay", nil, ErrBadOption},
		{"replay", []Option{WithReplay("nope", "sentiment", 1)}, workload.ErrUnknownApp},
		{"replay", []Option{WithReplay("sentiment-analysis", "nope", 1)}, ErrBadOption},
		{"replay", []Option{WithReplay("sentiment-analysis", "1", 1)}, ErrBadOption},
		{"replay", []Option{WithReplay("sentiment-analysis", "-1", 1)}, ErrBadOption},
	}
	for _, c := range cases {
		if _, err := Handler(c.name, c.opts...); !errors.Is(err, c.want) {
			t.Errorf("Handler(%q) = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestHealthAndRouting(t *testing.T) {
	h := mustHandler(t, "sentiment")
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, HealthPath, http.StatusOK},
		{http.MethodHead, HealthPath, http.StatusOK},
		{http.MethodGet, "/", http.StatusMethodNotAllowed},
		{http.MethodPut, "/", http.StatusMethodNotAllowed},
		{http.MethodPost, "/other", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.want {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, rec.Code, c.want)
		}
	}
}

// X-Output-Size is the body length in the output unit, whichever input size
// the caller claimed; a claimed size is accepted without a body to match.
func TestOutputSizeIsTheBodyInTheNextUnit(t *testing.T) {
	h := mustHandler(t, "translate")
	for _, hdr := range []http.Header{nil, {HeaderInputSize: {"123.5"}}, {HeaderInputSize: {"0"}}} {
		rec, out := postOK(t, h, []byte("good morning"), hdr)
		if want := float64(rec.Body.Len()) / 1024; out != want {
			t.Errorf("X-Output-Size %v, want %v (%d bytes)", out, want, rec.Body.Len())
		}
	}
}

func TestBadInputSizeHeaderIs400(t *testing.T) {
	h := mustHandler(t, "sentiment")
	for _, v := range []string{"abc", "-1", "NaN", "+Inf", "1e400", "0x"} {
		rec := post(h, []byte("fine"), http.Header{HeaderInputSize: {v}})
		if rec.Code != http.StatusBadRequest {
			t.Errorf("X-Input-Size %q: status %d, want 400", v, rec.Code)
		}
		assertOneLine(t, rec)
	}
}

func TestBodyPastTheBoundIs413(t *testing.T) {
	h := mustHandler(t, "sentiment", WithMaxBody(10))
	if rec := post(h, []byte("0123456789"), nil); rec.Code != http.StatusOK {
		t.Errorf("body at the bound: status %d, want 200", rec.Code)
	}
	if rec := post(h, []byte("0123456789a"), nil); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("body past the bound: status %d, want 413", rec.Code)
	}
	// Without a Content-Length the bound is found while reading.
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 100)))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked body past the bound: status %d, want 413", rec.Code)
	}
	assertOneLine(t, rec)
}

// A panicking function answers 500 with a reason instead of dropping the
// connection.
func TestPanicIs500(t *testing.T) {
	s := spec{name: "boom", inUnit: kb, outUnit: kb}
	h := newMux(s, func(_ context.Context, _ request) (result, error) { panic("kaboom") }, MaxBody)
	rec := post(h, nil, nil)
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "kaboom") {
		t.Errorf("status %d body %q, want 500 naming the panic", rec.Code, rec.Body)
	}
}

// assertOneLine checks the contract's one-line error reason.
func assertOneLine(t testing.TB, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.String()
	if !strings.HasSuffix(body, "\n") || strings.Count(body, "\n") != 1 || len(body) < 2 {
		t.Errorf("error body %q is not one line", body)
	}
}
