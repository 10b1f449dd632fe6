package liverun

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"gantry.dev/gantry/examples/functions"
)

// The local backend runs a command's leading "gantry" as this executable,
// which under `go test` is the test binary; so the test binary doubles as
// `gantry fn replay`, serving the instance contract on $PORT when its
// arguments say so.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "fn" && os.Args[2] == "replay" {
		if err := serveReplay(os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

func serveReplay(args []string) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	app := fs.String("app", "", "")
	fn := fs.String("function", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, err := functions.Handler("replay", functions.WithReplay(*app, *fn, 0))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", os.Getenv("PORT")))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return functions.Serve(ctx, ln, h, functions.DefaultDrain)
}
