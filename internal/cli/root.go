// Package cli wires Gantry's subcommands together. Each subcommand lives in
// its own file and only parses flags; the work happens in pkg/.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// Execute runs the root command and returns the process exit code.
func Execute() int {
	ctx, stop := notifySignals(context.Background())
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

// againKey holds, in the command's context, a channel closed on the
// second SIGINT or SIGTERM.
type againKey struct{}

// notifySignals returns a context cancelled on the first SIGINT or SIGTERM,
// holding a channel closed on the second (secondSignal). Both signals are
// caught from the start: a second signal that came before the command
// began waiting for it was lost before (signal.NotifyContext swallowed
// it), so two SIGTERMs 25 ms apart drained for the whole --drain-timeout.
func notifySignals(parent context.Context) (context.Context, func()) {
	again := make(chan struct{})
	ctx, cancel := context.WithCancel(context.WithValue(parent, againKey{}, (<-chan struct{})(again)))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-sigs:
				n++
				switch n {
				case 1:
					cancel()
				case 2:
					close(again)
				}
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(quit)
			cancel()
		})
	}
}

// secondSignal returns the channel closed on the second SIGINT or SIGTERM
// of notifySignals' context; nil (never) in a context without one.
func secondSignal(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(againKey{}).(<-chan struct{})
	return c
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
