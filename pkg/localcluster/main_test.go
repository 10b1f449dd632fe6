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

// serveProcessNodeEnv gives the cluster serveEnv runs one process node and
// no kwok node.
const serveProcessNodeEnv = "GANTRY_LOCALCLUSTER_TEST_PROCESS_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		os.Exit(serveForTest(os.Args[len(os.Args)-1]))
	}
	os.Exit(RunMain(m, Options{Nodes: 2, Scheduler: true, ControllerManager: true}))
}

func serveForTest(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := Options{Dir: dir}
	if os.Getenv(serveProcessNodeEnv) != "" {
		opts.Nodes, opts.ProcessNodes, opts.Scheduler, opts.ControllerManager = 0, 1, true, true
	}
	if err := Serve(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
