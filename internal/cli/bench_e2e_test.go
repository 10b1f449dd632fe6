//go:build !gantry_local

package cli

import (
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
	assertUsageErrors(t, []string{"bench", "e2e"}, cases)
}
