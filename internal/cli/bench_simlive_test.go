package cli

import (
	"testing"
)

// Every bad flag of bench simlive is a usage error (exit 2), reported
// before anything is started.
func TestBenchSimLiveFlagsAreUsageErrors(t *testing.T) {
	cases := [][]string{
		{"--app", "no-such-app"},
		{"--policy", "no-such-policy"},
		{"--policy", "oracle"},
		{"--trace", "no-such-trace"},
		{"--dist", "no-such-dist"},
		{"--rate", "0"},
		{"--rate", "-1"},
		{"--rate", "NaN"},
		{"--rate", "1e9"},
		{"--duration", "500ms"},
		{"--duration", "48h"},
		{"--start-delay", "-1s"},
		{"--start-delay", "11m"},
		{"--seed", "-1"},
		{"--capacity", "-1"},
		{"--runs", "0"},
		{"--runs", "101"},
		{"--sim-seeds", "0"},
		{"--tick", "0"},
		{"--tick", "20s"},
		{"--window", "500ms"},
		{"--idle-timeout", "0"},
		{"--no-such-flag"},
		{"extra-arg"},
	}
	assertUsageErrors(t, []string{"bench", "simlive"}, cases)
}
