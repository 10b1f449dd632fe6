package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gantry runs the root command in-process, as main does, and returns what it
// printed and the exit code Execute would map the error to.
func gantry(t *testing.T, args ...string) (stdout, stderr string, code int, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errBuf bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errBuf)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	code = 0
	if err != nil {
		code = 1
		var ue usageError
		if errors.As(err, &ue) {
			code = 2
		}
	}
	return out.String(), errBuf.String(), code, err
}

func TestSimBadInputGivesAClearErrorAndNonZeroExit(t *testing.T) {
	dir := t.TempDir()
	badCSV := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(badCSV, []byte("second,count\n0,5\n1,five\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(dir, "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--out", filepath.Join(notADir, "out")}, 1, "not a directory"},
		{[]string{"--app", "tetris"}, 2, `unknown app "tetris"`},
		{[]string{"--dist", "bimodal"}, 2, `unknown input-size distribution "bimodal"`},
		{[]string{"--trace", "zipf"}, 2, `unknown trace "zipf"`},
		{[]string{"--policies", "cypress,lambda"}, 2, `unknown policy "lambda"`},
		{[]string{"--policies", ","}, 2, "no policies"},
		{[]string{"--rate", "0"}, 2, "--rate must be a positive"},
		{[]string{"--rate", "-10"}, 2, "--rate must be a positive"},
		{[]string{"--rate", "NaN"}, 2, "--rate must be a positive"},
		{[]string{"--peak", "0"}, 2, "--peak must be a positive"},
		{[]string{"--peak", "-1"}, 2, "--peak must be a positive"},
		{[]string{"--peak", "10", "--rate", "5"}, 2, "not both"},
		{[]string{"--duration", "0s"}, 2, "--duration"},
		{[]string{"--duration", "-5m"}, 2, "--duration"},
		{[]string{"--duration", "300ms"}, 2, "at least 1s"},
		{[]string{"--nodes", "0"}, 2, "--nodes"},
		{[]string{"--min-size", "0"}, 2, "--min-size and --max-size must be positive"},
		{[]string{"--max-size", "-3"}, 2, "--min-size and --max-size must be positive"},
		{[]string{"--min-size", "5", "--max-size", "2"}, 2, "must be below maximum"},
		{[]string{"--cores-per-node", "-4"}, 2, "--cores-per-node"},
		{[]string{"--cold-start", "0s"}, 2, "--cold-start"},
		{[]string{"--workers", "0"}, 2, "--workers"},
		{[]string{"--trace-file", badCSV}, 2, "line 3"},
		{[]string{"--trace-file", filepath.Join(dir, "missing.csv")}, 1, "missing.csv"},
		{[]string{"--trace-file", badCSV, "--trace", "wiki"}, 2, "not both"},
		{[]string{"--azure-function", "abc"}, 2, "needs --trace-file"},
		{[]string{"--large-duration", "1m"}, 2, "only applies to --experiment"},
		{[]string{"--experiment", "nature"}, 2, `unknown experiment "nature"`},
		{[]string{"--experiment", "paper", "--app", "image-compression"}, 2, "--app cannot be combined"},
		{[]string{"--experiment", "paper", "--policies", "magic"}, 2, `unknown policy "magic"`},
		{[]string{"--experiment", "paper", "--duration", "-1s"}, 2, "--duration"},
		{[]string{"extra-arg"}, 2, "unknown command"},
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
