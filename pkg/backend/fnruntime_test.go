package backend

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A stack's "gantry fn ..." runs the slim runtime when there is one, as a
// plain command and in a shell line; anything else naming gantry runs
// this binary; NoFnRuntime keeps `gantry fn`.
func TestGantryFnRunsTheSlimRuntime(t *testing.T) {
	l := NewLocal(LocalConfig{Self: "/opt/g/gantry", FnRuntime: "/opt/g/gantry-fn"})
	cmd := l.commandFor("gantry fn replay --app a --function 0")
	if cmd.Path != "/opt/g/gantry-fn" || !slices.Equal(cmd.Args, []string{FnRuntimeName, "replay", "--app", "a", "--function", "0"}) {
		t.Errorf("plain line: %s %q", cmd.Path, cmd.Args)
	}
	if got := l.command("gantry fn sentiment 2>&1"); got != `'/opt/g/gantry-fn' sentiment 2>&1` {
		t.Errorf("shell line: %q", got)
	}
	if got := l.command("gantry fnord"); got != `'/opt/g/gantry' fnord` {
		t.Errorf("another subcommand: %q", got)
	}
	full := NewLocal(LocalConfig{Self: "/opt/g/gantry", FnRuntime: NoFnRuntime})
	if got := full.command("gantry fn sentiment"); got != `'/opt/g/gantry' fn sentiment` {
		t.Errorf("NoFnRuntime: %q", got)
	}
}

// The slim runtime is found beside the gantry binary, if it is an
// executable Go program; absent, it is not an error worth a warning.
func TestFindFnRuntimeBesideTheBinary(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "gantry")
	if _, err := FindFnRuntime(self); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("none there: %v, want ErrNotExist", err)
	}
	slim := filepath.Join(dir, FnRuntimeName)
	if err := os.WriteFile(slim, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FindFnRuntime(self); err == nil {
		t.Fatal("a file that is not executable was taken")
	}
	// A Go program: this test binary, which records no VCS revision.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(slim)
	if err := os.Link(exe, slim); err != nil {
		data, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(slim, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := FindFnRuntime(self); err != nil || got != slim {
		t.Fatalf("got %q, %v; want %s", got, err, slim)
	}
	if l := NewLocal(LocalConfig{Self: self}); l.cfg.FnRuntime != slim {
		t.Fatalf("NewLocal did not pick it up: %q", l.cfg.FnRuntime)
	}
}
