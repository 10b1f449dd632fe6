package cli

import (
	"context"
	"errors"
	"io"
	"testing"
)

// Every bad flag is a usage error before a cluster is started.
func TestBenchE2EBadFlagsAreUsageErrors(t *testing.T) {
	cases := [][]string{
		{"--rate", "0"},
		{"--rate", "-5"},
		{"--rate", "501"},
		{"--rate", "NaN"},
		{"--duration", "500ms"},
		{"--duration", "31m"},
		{"--burst", "0"},
		{"--burst", "501"},
		{"--mode", "bursty"},
		{"--max-scale", "1"},
		{"--max-scale", "21"},
		{"--size", "0"},
		{"--size", "65"},
		{"--slo", "0s"},
		{"--criticality", "100"},
		{"--nodes", "0"},
		{"--interval-period", "0s"},
		{"--orchestrators", "vanilla,knative"},
		{"--orchestrators", ","},
		{"--quick", "--burst", "0"},
		{"--quick", "--duration", "2h"},
		{"--controller-args", "--no-such-flag"},
		{"--no-such-flag"},
		{"extra-arg"},
	}
	for _, args := range cases {
		root := newRootCmd()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"bench", "e2e"}, args...))
		err := root.ExecuteContext(context.Background())
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("gantry bench e2e %v: got %v, want a usage error", args, err)
		}
	}
}
