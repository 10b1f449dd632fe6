package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"
)

// Every out-of-bounds flag is a usage error (exit 2) before anything starts.
func TestBenchGatewayBadFlagsAreUsageErrors(t *testing.T) {
	cases := [][]string{
		{"--rate", "0"},
		{"--rate", "20001"},
		{"--rate", "NaN"},
		{"--duration", "11m"},
		{"--duration", "500ms"},
		{"--duration", "5s", "--round", "2s"},
		{"--round", "1500ms"},
		{"--warmup", "-1s"},
		{"--body-bytes", "0"},
		{"--max-inflight", "0"},
		{"--gomaxprocs", "-1"},
		{"--ready-wait", "0s"},
		{"--rate", "fast"},
		{"--no-such-flag"},
		{"extra-arg"},
	}
	assertUsageErrors(t, []string{"bench", "gateway"}, cases)
}

// --json prints exactly one JSON object; --openfaas ” skips that path.
func TestBenchGatewayJSONIsOneObject(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load for a few seconds")
	}
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(io.Discard)
	dir := filepath.Join(t.TempDir(), "out")
	// --gantry-process=false: the child would be this test binary, which
	// does not know the hidden flag (pkg/gatewaybench tests that path).
	root.SetArgs([]string{"bench", "gateway", "--json", "--quiet", "--rate", "50", "--duration", "1s", "--warmup", "0s",
		"--openfaas", "", "--gantry-process=false", "--out", dir})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	var rep struct {
		Paths []struct {
			Path  string  `json:"path"`
			P99us float64 `json:"p99_us"`
		} `json:"paths"`
		OpenFaaS struct {
			Measured bool   `json:"measured"`
			Note     string `json:"note"`
		} `json:"openfaas"`
	}
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Error("more than one JSON value on stdout")
	}
	if len(rep.Paths) != 3 || rep.OpenFaaS.Measured || rep.OpenFaaS.Note == "" {
		t.Errorf("report %+v", rep)
	}
}
