package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// serveEnv makes the test binary act as `gantry cluster serve` for
// TestUpEnvDown, with the cluster folder as its last argument.
const serveEnv = "GANTRY_LOCALCLUSTER_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		os.Exit(serveForTest(os.Args[len(os.Args)-1]))
	}
	os.Exit(RunMain(m, Options{Nodes: 2, Scheduler: true, ControllerManager: true}))
}

func serveForTest(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Serve(ctx, Options{Dir: dir}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
