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
		{"bench", "queue", "extra-arg"},
	}
	for _, args := range cases {
		root := newRootCmd()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(args)
		err := root.ExecuteContext(context.Background())
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("gantry %v: got %v, want a usage error", args, err)
		}
	}
}
