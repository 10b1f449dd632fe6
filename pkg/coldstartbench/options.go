// Package coldstartbench measures cold starts on the local runtime: for
// each subject, from "no process of the function exists" to the first
// byte of the answer to a request sent through Gantry's gateway, which
// starts the instance on the request's arrival (scale from zero). The
// subjects run side by side in one run, in rotating rounds, so that the
// machine's load weighs on each alike: a minimal Go HTTP server (the
// floor: what any Go program pays for exec, runtime start-up and listen),
// the example functions run by the slim gantry-fn runtime and, when a
// gantry binary is given, by `gantry fn`. Each is measured with the
// readiness polling every command gets, and with the socket passed to it
// (socket_activation), which every subject here supports.
package coldstartbench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gantry.dev/gantry/examples/functions"
)

// Modes: how the runtime learns an instance can take requests.
const (
	ModePoll   = "poll"   // the runtime polls GET /_/health until it answers
	ModeSocket = "socket" // the runtime passes the listening socket (LISTEN_FDS)
)

// Bounds on a run.
const (
	MaxRuns      = 10000
	MaxFunctions = 16
)

// Options configure a run.
type Options struct {
	// Functions are example functions, each the first of an app's chain
	// (its payload generator makes the request body).
	Functions []string
	// Runs is the number of cold starts measured per subject and mode.
	Runs int
	// Modes are ModePoll and/or ModeSocket.
	Modes []string
	// Cache is where the floor server and the slim runtime are built.
	Cache string
	// Module is the Gantry module's source, where gantry-fn is built
	// from; empty: FnRuntime must be set.
	Module string
	// FnRuntime is a gantry-fn binary to use instead of building one.
	FnRuntime string
	// Gantry is a gantry binary; when set, `gantry fn` is measured too.
	Gantry string
	// SampleTimeout bounds one cold start (default 30 s).
	SampleTimeout time.Duration
	// Progress, when set, hears a line per finished round.
	Progress io.Writer
}

// DefaultOptions are the defaults of `gantry bench coldstart`.
func DefaultOptions() Options {
	return Options{Functions: []string{"sentiment", "email-parse", "image-compress"}, Runs: 50,
		Modes: []string{ModePoll, ModeSocket}, SampleTimeout: 30 * time.Second}
}

// DefaultCache is $GANTRY_CACHE/coldstart, else ~/.cache/gantry/coldstart.
func DefaultCache() string {
	if c := os.Getenv("GANTRY_CACHE"); c != "" {
		return filepath.Join(c, "coldstart")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "gantry-coldstart")
	}
	return filepath.Join(home, ".cache", "gantry", "coldstart")
}

// Validate checks the options before anything starts.
func (o *Options) Validate() error {
	switch {
	case o.Runs < 1 || o.Runs > MaxRuns:
		return fmt.Errorf("runs must be in [1, %d], got %d", MaxRuns, o.Runs)
	case len(o.Functions) > MaxFunctions:
		return fmt.Errorf("at most %d functions, got %d", MaxFunctions, len(o.Functions))
	case len(o.Modes) == 0:
		return fmt.Errorf("name a mode: %s or %s", ModePoll, ModeSocket)
	case o.Cache == "":
		return fmt.Errorf("no cache folder to build in")
	case o.Module == "" && o.FnRuntime == "" && len(o.Functions) > 0:
		return fmt.Errorf("the example functions need a gantry-fn binary or the module's source to build one")
	case o.SampleTimeout <= 0 || o.SampleTimeout > 10*time.Minute:
		return fmt.Errorf("sample timeout must be in (0, 10m], got %v", o.SampleTimeout)
	}
	for _, m := range o.Modes {
		if m != ModePoll && m != ModeSocket {
			return fmt.Errorf("mode %q: want %s or %s", m, ModePoll, ModeSocket)
		}
	}
	if len(o.Modes) != len(dedup(o.Modes)) {
		return fmt.Errorf("modes %v name one twice", o.Modes)
	}
	if len(o.Functions) != len(dedup(o.Functions)) {
		return fmt.Errorf("functions %v name one twice", o.Functions)
	}
	for _, f := range o.Functions {
		if _, err := payloadApp(f); err != nil {
			return err
		}
		if _, err := functions.Describe(f); err != nil {
			return err
		}
	}
	return nil
}

func dedup(s []string) []string { return slices.Compact(slices.Sorted(slices.Values(s))) }
