package cli

import (
	"context"
	"errors"
	"io"
	"testing"
)

// Every subcommand maps a stray argument or an unknown flag to a usage
// error (exit 2) before doing any work.
func TestStrayArgumentsAndUnknownFlagsAreUsageErrors(t *testing.T) {
	cases := [][]string{
		{"sim", "extra-arg"},
		{"sim", "--no-such-flag"},
		{"controller", "extra-arg"},
		{"cluster", "env", "extra-arg"},
		{"cluster", "up", "--no-such-flag"},
		{"cluster", "up", "--process-nodes", "17"},
		{"cluster", "up", "--process-nodes", "-1"},
		{"bench", "queue", "extra-arg"},
	}
	assertUsageErrors(t, nil, cases)
}

// assertUsageErrors runs gantry with prefix and each case's arguments and
// expects a usage error (exit code 2) from every one.
func assertUsageErrors(t *testing.T, prefix []string, cases [][]string) {
	t.Helper()
	for _, args := range cases {
		root := newRootCmd()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		argv := append(append([]string{}, prefix...), args...)
		root.SetArgs(argv)
		err := root.ExecuteContext(context.Background())
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("gantry %v: got %v, want a usage error", argv, err)
		}
	}
}
