package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// runLoadCmd runs gantry with args and returns stdout and the error.
func runLoadCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// loadServer answers 200 and remembers the paths and sizes it saw.
type loadServer struct {
	*httptest.Server
	hits  atomic.Int64
	mu    sync.Mutex
	paths map[string]bool
	sizes int
}

func newLoadServer(t *testing.T) *loadServer {
	s := &loadServer{paths: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.paths[r.URL.Path] = true
		if r.Header.Get("X-Input-Size") != "" {
			s.sizes++
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestLoadJSONHasExactlyTheDocumentedFields(t *testing.T) {
	srv := newLoadServer(t)
	out, err := runLoadCmd(t, "load", "--url", srv.URL+"/f", "--rate", "20", "--duration", "1s",
		"--slo", "250ms", "--json", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	want := []string{"requests", "ok", "errors", "errors_by_kind", "throughput_rps", "slo_ms", "slo_compliance",
		"p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms", "measured", "duration_s"}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	requests, ok, errs := m["requests"].(float64), m["ok"].(float64), m["errors"].(float64)
	if requests == 0 || requests != ok+errs || float64(srv.hits.Load()) != requests || m["slo_ms"] != 250.0 {
		t.Errorf("requests %v = ok %v + errors %v? server saw %d; slo %v", requests, ok, errs, srv.hits.Load(), m["slo_ms"])
	}
}

// --function hits /function/NAME, takes the function's SLO from the stack
// file and its app's input sizes; --out gets one CSV row per request, a PNG
// and the summary.
func TestLoadFunctionOnGatewayWritesOut(t *testing.T) {
	srv := newLoadServer(t)
	dir := filepath.Join(t.TempDir(), "out")
	out, err := runLoadCmd(t, "load", "--gateway", srv.URL, "--function", "image-compress", "--stack", exampleStack,
		"--rate", "20", "--duration", "1s", "--json", "--quiet", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Requests int     `json:"requests"`
		SLOMs    float64 `json:"slo_ms"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	if !srv.paths["/function/image-compress"] || len(srv.paths) != 1 || srv.sizes != sum.Requests {
		t.Errorf("server saw paths %v and %d sizes for %d requests", srv.paths, srv.sizes, sum.Requests)
	}
	srv.mu.Unlock()
	if sum.SLOMs != 1500 {
		t.Errorf("slo_ms %v, want the stack's 1500 for image-compress", sum.SLOMs)
	}
	f, err := os.Open(filepath.Join(dir, loadCSVFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != sum.Requests+1 {
		t.Errorf("CSV has %d rows (err %v), want a header and %d requests", len(rows), err, sum.Requests)
	}
	for _, name := range []string{loadPlotFile, loadSummaryFile} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLoadAppPathAndPayloadFromExamples(t *testing.T) {
	srv := newLoadServer(t)
	if _, err := runLoadCmd(t, "load", "--gateway", srv.URL, "--app", "document-summary", "--stack", exampleStack,
		"--payload", "replay:document-summary", "--rate", "10", "--duration", "1s", "--quiet"); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if !srv.paths["/app/document-summary"] || srv.sizes == 0 {
		t.Errorf("server saw paths %v, %d sizes", srv.paths, srv.sizes)
	}
}

// Every bad flag is a usage error (exit 2) before a single request is sent.
func TestLoadFlagBoundsAreUsageErrors(t *testing.T) {
	srv := newLoadServer(t)
	u := srv.URL + "/f"
	badCSV := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(badCSV, []byte("second,count\n0,5\n1,five\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := [][]string{
		{"load"},
		{"load", "--url", u, "--slo", "1s", "--trace-file", badCSV},
		{"load", "--function", "a", "--app", "b"},
		{"load", "--url", u, "--gateway", srv.URL, "--slo", "1s"},
		{"load", "--url", "ftp://host/x", "--slo", "1s"},
		{"load", "--url", u},
		{"load", "--url", u, "--slo", "1s", "--rate", "0"},
		{"load", "--url", u, "--slo", "1s", "--rate", "NaN"},
		{"load", "--url", u, "--slo", "1s", "--rate", "1e12"},
		{"load", "--url", u, "--slo", "1s", "--rate", "5000", "--duration", "1h"},
		{"load", "--url", u, "--slo", "1s", "--duration", "500ms"},
		{"load", "--url", u, "--slo", "1s", "--duration", "25h"},
		{"load", "--url", u, "--slo", "1s", "--max-inflight", "0"},
		{"load", "--url", u, "--slo", "1s", "--max-inflight", "2000000"},
		{"load", "--url", u, "--slo", "1s", "--timeout", "0s"},
		{"load", "--url", u, "--slo", "1s", "--timeout", "1h"},
		{"load", "--url", u, "--slo", "-1s"},
		{"load", "--url", u, "--slo", "1s", "--min-size", "-1"},
		{"load", "--url", u, "--slo", "1s", "--min-size", "5", "--max-size", "2"},
		{"load", "--url", u, "--slo", "1s", "--pool", "-1"},
		{"load", "--url", u, "--slo", "1s", "--pool", "100000"},
		{"load", "--url", u, "--slo", "1s", "--payload", "nonsense"},
		{"load", "--url", u, "--slo", "1s", "--trace", "nonsense"},
		{"load", "--url", u, "--slo", "1s", "--dist", "nonsense"},
		{"load", "--url", u, "--workload", "nonsense"},
		{"load", "--url", u, "--slo", "1s", "--azure-function", "x"},
		{"load", "--url", u, "--slo", "1s", "--trace-file", "x.csv", "--trace", "wiki"},
		{"load", "--function", "image-compression", "--slo", "1s", "--payload", "zeros", "--unit-bytes", "1e9"},
		{"load", "--url", u, "--slo", "1s", "stray-arg"},
		{"load", "--url", u, "--slo", "1s", "--no-such-flag"},
		{"load", "--gateway", "notaurl", "--function", "f", "--slo", "1s"},
		{"load", "--gateway", "ftp://127.0.0.1:1", "--app", "a", "--slo", "1s"},
		{"load", "--gateway", "127.0.0.1:8080", "--function", "f"},
		{"load", "--gateway", "notaurl", "--function", "f"}, // before the SLO is looked up there
		{"load", "--gateway", "http://", "--app", "a"},
	}
	for _, args := range cases {
		_, err := runLoadCmd(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("gantry %v: got %v, want a usage error", args, err)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("%d requests were sent by rejected commands", n)
	}
}

// The progress bar redraws itself with carriage returns: it goes to
// stderr only when stderr is a terminal, never into a file or a pipe.
func TestLoadProgressStaysOutOfANonTerminalStderr(t *testing.T) {
	srv := newLoadServer(t)
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(errFile)
	root.SetArgs([]string{"load", "--url", srv.URL + "/f", "--slo", "1s", "--rate", "20", "--duration", "1s", "--pool", "1"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(errFile.Name())
	if strings.Contains(string(got), "sent ") || strings.Contains(string(got), "pre-generating") {
		t.Fatalf("stderr, a file, got the progress:\n%q", got)
	}
	if !strings.Contains(out.String(), "requests") {
		t.Fatalf("no report on stdout: %q", out.String())
	}
}
