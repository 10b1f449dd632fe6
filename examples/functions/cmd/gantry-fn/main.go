// Command gantry-fn is the example functions' slim runtime: `gantry fn`
// without the rest of Gantry. It exists for cold starts only. The gantry
// binary links client-go, component-base and kube-openapi, whose package
// initialisation costs about 20 ms of the 23 ms from exec to listening;
// this binary links the example functions and the standard library, so an
// instance the local runtime starts from zero answers in a few
// milliseconds. It takes the same flags as `gantry fn` (both run through
// examples/functions/fnrun), and the local runtime runs it for a stack's
// "gantry fn ..." commands when it finds it next to the gantry binary
// (`make build` puts it there) or is given its path (pkg/backend).
// TestSlimRuntimeLinksNoKubernetes keeps it slim.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"gantry.dev/gantry/examples/functions/fnrun"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := pflag.NewFlagSet("gantry-fn", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: gantry-fn NAME [flags]   (the same as gantry fn NAME)\n%s", fs.FlagUsages())
	}
	var f fnrun.Flags
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "gantry-fn: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := f.Main(ctx, fs.Args(), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "gantry-fn: %v\n", err)
		if ue := (fnrun.UsageError{}); errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}
