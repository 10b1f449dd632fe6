package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
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

// The second SIGTERM is kept even when it comes before anything waits for
// it: gantry serve begins waiting for it only once its drain has begun,
// and two SIGTERMs 25 ms apart on a loaded machine (what gantry up sends an
// interrupted run's gateways) came before that, so the second was lost
// and the gateway drained for its whole --drain-timeout.
func TestSecondSignalIsKeptUntilAsked(t *testing.T) {
	ctx, stop := notifySignals(context.Background())
	defer stop()
	if secondSignal(ctx) == nil {
		t.Fatal("no second-signal channel in the context")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first signal did not cancel the context")
	}
	select {
	case <-secondSignal(ctx):
		t.Fatal("the first signal counted as the second")
	default:
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Only now does anything ask.
	select {
	case <-secondSignal(ctx):
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal was lost")
	}
	if secondSignal(context.Background()) != nil {
		t.Error("a context without notifySignals has a second-signal channel")
	}
}
