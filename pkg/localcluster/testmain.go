package localcluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"testing"
)

// shared is the one cluster of a test binary, started on first use.
var shared struct {
	mu      sync.Mutex      // guards the fields below
	ctx     context.Context // cancelled on SIGINT or SIGTERM, aborting a start
	enabled bool            // RunMain was called
	opts    Options
	cluster *Cluster
	err     error // Start's error, returned to every later caller
}

// RunMain runs a package's tests with one shared cluster, which Shared
// starts on first use, so tests that do not need it do not wait for it. Call
// it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(localcluster.RunMain(m, opts)) }
//
// The cluster is stopped and its folder removed when the tests end, or on
// SIGINT or SIGTERM. If a test failed, the folder and logs are kept and their
// paths printed.
func RunMain(m *testing.M, opts Options) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shared.mu.Lock()
	shared.ctx, shared.enabled, shared.opts = ctx, true, opts
	shared.mu.Unlock()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "localcluster: %v: stopping the shared cluster\n", sig)
		cancel()
		stopShared(false)
		os.Exit(1)
	}()
	code := m.Run()
	signal.Stop(sigs)
	stopShared(code != 0)
	return code
}

// Shared returns the test binary's cluster, starting it on the first call.
// Under -short it skips the test. It fails the test if the cluster cannot
// start, and every later caller gets the same error at once.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the local control plane; skipped under -short")
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.enabled {
		tb.Fatal("localcluster.Shared: the package's TestMain must call localcluster.RunMain")
	}
	if shared.cluster == nil && shared.err == nil {
		opts := shared.opts
		if opts.Progress == nil && testing.Verbose() {
			opts.Progress = os.Stderr
		}
		shared.cluster, shared.err = Start(shared.ctx, opts)
	}
	if shared.err != nil {
		tb.Fatalf("starting the shared control plane: %v", shared.err)
	}
	return shared.cluster
}

// stopShared stops the shared cluster. With keepLogs it leaves the folder and
// prints where each log is.
func stopShared(keepLogs bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	c := shared.cluster
	if c == nil {
		return
	}
	if keepLogs {
		c.stopOnce.Do(func() { c.stopErr = c.teardown(stopGrace, true) })
		printLogPaths(c)
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
	}
}

func printLogPaths(c *Cluster) {
	logs := c.LogPaths()
	fmt.Fprintln(os.Stderr, "localcluster: tests failed; the control-plane logs are kept:")
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		fmt.Fprintf(os.Stderr, "  %-24s %s\n", name, logs[name])
	}
}
