package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every flag and every file is bounded before anything is allocated: a
// flag beyond the simulator's bounds exits 2, a file beyond them exits 1
// and names its line.
func TestSimFlagsAndFilesBeyondTheBoundsExitCleanly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := write("huge.csv", "second,count\n0,5\n1,1e308\n")
	big := write("big.csv", strings.Repeat("1\n", 2000))
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--rate", "1e9"}, 2, "--rate and --peak must be at most"},
		{[]string{"--rate", "1e308"}, 2, "--rate and --peak must be at most"},
		{[]string{"--peak", "1e9"}, 2, "--rate and --peak must be at most"},
		{[]string{"--duration", "100000h"}, 2, "--duration and --large-duration must be at most"},
		{[]string{"--experiment", "paper", "--large-duration", "100000h"}, 2, "must be at most"},
		{[]string{"--rate", "900000", "--duration", "1h"}, 2, "expected requests"},
		{[]string{"--nodes", "1000000000"}, 2, "--nodes and --cores-per-node must be at most"},
		{[]string{"--cores-per-node", "100000"}, 2, "--nodes and --cores-per-node must be at most"},
		{[]string{"--cold-start", "1000h"}, 2, "--cold-start must be at most"},
		{[]string{"--max-queue", "0"}, 2, "--max-queue must be in"},
		{[]string{"--max-queue", "10000000"}, 2, "--max-queue must be in"},
		{[]string{"--peak", "900000", "--duration", "2h"}, 2, "requests, above"},
		{[]string{"--trace-file", huge}, 2, "line 3"}, // a malformed file is a usage error
		{[]string{"--max-size", "1e10"}, 2, "beyond 1h0m0s; the largest maximum within it is"},
		{[]string{"--app", "synthetic", "--exec-mean", "500ns"}, 2, "shortest execution time"},
		{[]string{"--rate", "0.001", "--duration", "10s", "--policies", "atoll"}, 2, "no request arrived"},
		{[]string{"--cold-start", "30s", "--duration", "10s"}, 2, "must be shorter than --duration"},
		{[]string{"--experiment", "paper", "--large-duration", "1s"}, 2, "must be shorter than --large-duration"},
		{[]string{"--cold-start-dist", "pareto"}, 2, "--cold-start-dist must be one of"},
		{[]string{"--cold-start-dist", "exp", "--policies", "gantry,oracle"}, 2, "constant cold start"},
		{[]string{"--keep-alive", "1m", "--policies", "gantry"}, 2, "add commercial"},
		{[]string{"--keep-alive", "-1s", "--policies", "commercial"}, 2, "--keep-alive must be in"},
		{[]string{"--experiment", "paper", "--cold-boot"}, 2, "cannot be combined with --experiment paper"},
		{[]string{"--trace-file", big, "--rate", "900000"}, 2, "requests, above"},
	}
	for _, c := range cases {
		args := append([]string{"sim"}, c.args...)
		stdout, _, code, err := gantry(t, args...)
		if err == nil {
			t.Errorf("%v: no error", c.args)
			continue
		}
		if code != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, err %q; want exit %d and %q", c.args, code, err, c.code, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: printed %q on stdout on failure", c.args, stdout)
		}
	}
}

// SIGINT and SIGTERM end the command's context (Execute's
// signal.NotifyContext); the run stops within a tick, not at the end of
// its trace, and the command fails.
func TestSimStopsWhenItsContextEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator")
	}
	root := newRootCmd()
	var out, errBuf bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errBuf)
	root.SetArgs([]string{"sim", "--app", "sentiment-analysis", "--rate", "5000", "--duration", "24h",
		"--policies", "gantry", "--out", filepath.Join(t.TempDir(), "out")})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	err := root.ExecuteContext(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled (432M requests cannot have finished)", err)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q on stdout", out.String())
	}
}
