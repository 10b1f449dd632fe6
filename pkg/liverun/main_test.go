package liverun

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/spf13/pflag"

	"gantry.dev/gantry/examples/functions/fnrun"
)

// The local backend runs a command's leading "gantry" as this executable,
// which under `go test` is the test binary; so the test binary doubles as
// `gantry fn NAME`, through the same code as the real command
// (examples/functions/fnrun): on $PORT, or on the socket the runtime
// passes (socket_activation).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "fn" {
		if err := serveFn(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

func serveFn(args []string) error {
	fs := pflag.NewFlagSet("fn", pflag.ContinueOnError)
	var f fnrun.Flags
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return f.Main(ctx, fs.Args(), os.Stdout, os.Stderr)
}
