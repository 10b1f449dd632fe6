// Package cli wires Gantry's subcommands together. Each subcommand lives in
// its own file and only parses flags; the work happens in pkg/.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Execute runs the root command and returns the process exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "gantry:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "gantry",
		Short:         "Keep latency-sensitive serverless functions inside their SLOs with few containers",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newSimCmd(),
		newBenchCmd(),
		newLoadCmd(),
		newFnCmd(),
		newServeCmd(),
		newUpCmd(),
	)
	// cluster, controller and node: the full build's, or stand-ins in the
	// local build (build.go).
	root.AddCommand(kubeCommands()...)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	wrapArgErrors(root)
	return root
}

// wrapArgErrors makes cobra's positional-argument errors usage errors, so a
// stray argument exits 2 like a bad flag does.
func wrapArgErrors(c *cobra.Command) {
	for _, sub := range c.Commands() {
		wrapArgErrors(sub)
	}
	validate := c.Args
	if validate == nil {
		if c.HasSubCommands() {
			return // cobra reports unknown subcommands itself
		}
		validate = cobra.NoArgs
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := validate(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// usageError marks bad flags or arguments; Execute maps it to exit code 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}
