package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gantry sim draws no progress bar into a stderr that is a file or a
// pipe (a log, `2>&1 | tail`): only a terminal gets one.
func TestSimProgressOnlyOnATerminal(t *testing.T) {
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	root := newRootCmd()
	root.SetOut(new(discard))
	root.SetErr(errFile)
	root.SetArgs([]string{"sim", "--app", "sentiment-analysis", "--policies", "gantry", "--duration", "20s", "--rate", "5", "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if st, err := errFile.Stat(); err != nil || st.Size() != 0 {
		data, _ := os.ReadFile(errFile.Name())
		t.Fatalf("stderr, a file, got %q (%v); want nothing", data, err)
	}
	if w := terminalOnly(errFile); w != nil {
		t.Errorf("terminalOnly(a file) = %v, want nil", w)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// An interrupted gantry sim says so, not "context canceled".
func TestSimInterruptedSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	root := newRootCmd()
	root.SetOut(new(discard))
	root.SetErr(new(discard))
	root.SetArgs([]string{"sim", "--app", "sentiment-analysis", "--policies", "gantry", "--duration", "20s", "--rate", "5"})
	err := root.ExecuteContext(ctx)
	var ue usageError
	if err == nil || !strings.Contains(err.Error(), "interrupted (SIGINT or SIGTERM)") || errors.As(err, &ue) {
		t.Fatalf("interrupted sim: %v, want it to say it was interrupted (exit 1)", err)
	}
}
