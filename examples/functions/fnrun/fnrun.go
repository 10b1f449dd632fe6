// Package fnrun runs one example function as a process: its flags, the
// environment a runtime sets (PORT, POD_IP, the replay settings), where it
// listens (a socket passed systemd-style, else an address) and serving
// until its context ends. `gantry fn` and the slim runtime
// (examples/functions/cmd/gantry-fn) both run through it, so the two take
// the same flags and behave alike.
//
// It must not import the Kubernetes libraries, directly or not: the slim
// runtime exists so that an instance does not pay for their initialisation
// (TestSlimRuntimeLinksNoKubernetes).
package fnrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/listenfd"
)

// Environment variables a stack file sets instead of flags: PORT as
// of-watchdog reads it, the others for replay.
const (
	EnvPort     = "PORT"
	EnvPodIP    = "POD_IP"
	EnvApp      = "GANTRY_APP"
	EnvFunction = "GANTRY_FUNCTION"
	EnvSeed     = "GANTRY_SEED"
)

// UsageError marks bad flags, arguments or environment: the command exits 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

func usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// Flags are the command's flags.
type Flags struct {
	Addr, App, Function string
	Seed                uint64
	Drain               time.Duration
	List                bool
	fs                  *pflag.FlagSet
	// inherited is listenfd.Inherited, replaced in tests.
	inherited func() (net.Listener, bool, error)
}

// Register adds the flags to fs (a cobra command's, or the slim runtime's).
func (f *Flags) Register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.Addr, "addr", "", "listen address (default $POD_IP:$PORT, or 127.0.0.1:$PORT without POD_IP; a socket passed with LISTEN_FDS takes its place)")
	fs.BoolVar(&f.List, "list", false, "list the functions and the apps they serve")
	fs.StringVar(&f.App, "app", "", "replay only: the app (default $"+EnvApp+")")
	fs.StringVar(&f.Function, "function", "", "replay only: the app's function, by name or 0-based index (default $"+EnvFunction+")")
	fs.Uint64Var(&f.Seed, "seed", 0, "replay only: seed of the noise, 0 for a random one (default $"+EnvSeed+")")
	fs.DurationVar(&f.Drain, "drain", functions.DefaultDrain, "on SIGTERM, how long in-flight requests may run before they are cut off")
}

func (f *Flags) changed(name string) bool { return f.fs != nil && f.fs.Changed(name) }

// Main is the command: with List it lists the functions on stdout, else it
// serves the function args names until ctx ends, saying where it listens
// on stderr.
func (f *Flags) Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if f.List {
		if len(args) > 0 {
			return usagef("--list takes no function name")
		}
		return List(stdout)
	}
	if len(args) != 1 {
		return usagef("name one function; --list shows them")
	}
	return f.serve(ctx, args[0], stderr)
}

func (f *Flags) serve(ctx context.Context, name string, stderr io.Writer) error {
	if _, err := functions.Describe(name); err != nil {
		return UsageError{err}
	}
	if f.Drain <= 0 {
		return usagef("--drain must be positive, got %v", f.Drain)
	}
	opts, err := f.options(name)
	if err != nil {
		return err
	}
	h, err := functions.Handler(name, opts...)
	if err != nil {
		if errors.Is(err, functions.ErrBadOption) {
			return UsageError{err}
		}
		return err
	}
	ln, err := f.listen(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "gantry fn %s: listening on http://%s\n", name, ln.Addr())
	return functions.Serve(ctx, ln, h, f.Drain)
}

// listen takes the socket the runtime passed, if any, else listens at the
// address the flags and the environment give.
func (f *Flags) listen(ctx context.Context) (net.Listener, error) {
	inherited := f.inherited
	if inherited == nil {
		inherited = listenfd.Inherited
	}
	ln, passed, err := inherited()
	switch {
	case err != nil:
		return nil, err
	case passed && f.Addr != "":
		ln.Close()
		return nil, usagef("--addr %s and a passed socket (%s) both say where to listen", f.Addr, listenfd.EnvFDs)
	case passed:
		return ln, nil
	}
	addr, err := f.listenAddr()
	if err != nil {
		return nil, err
	}
	if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", addr); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// options builds replay's options from flags, falling back to the
// environment, and rejects replay flags on any other function.
func (f *Flags) options(name string) ([]functions.Option, error) {
	if name != "replay" {
		if f.changed("app") || f.changed("function") || f.changed("seed") {
			return nil, usagef("--app, --function and --seed only apply to replay")
		}
		return nil, nil
	}
	app, fn := orEnv(f.App, EnvApp), orEnv(f.Function, EnvFunction)
	if app == "" || fn == "" {
		return nil, usagef("replay needs --app (or $%s) and --function (or $%s)", EnvApp, EnvFunction)
	}
	seed := f.Seed
	if v := os.Getenv(EnvSeed); !f.changed("seed") && v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, usagef("$%s must be an unsigned integer, got %q", EnvSeed, v)
		}
		seed = s
	}
	return []functions.Option{functions.WithReplay(app, fn, seed)}, nil
}

func orEnv(v, env string) string {
	if v != "" {
		return v
	}
	return os.Getenv(env)
}

// listenAddr is --addr, or $POD_IP (else loopback) at $PORT: the gateway
// starts instances next to itself and sets PORT, as OpenFaaS does; the
// Kubernetes backend also sets POD_IP from the downward API.
func (f *Flags) listenAddr() (string, error) {
	if f.Addr != "" {
		// A malformed address is the caller's mistake (exit 2), not a
		// failure to listen.
		if _, port, err := net.SplitHostPort(f.Addr); err != nil || !portNumber(port) {
			return "", usagef("--addr must be HOST:PORT with a port from 0 to 65535, got %q", f.Addr)
		}
		return f.Addr, nil
	}
	port := os.Getenv(EnvPort)
	if port == "" {
		return "", usagef("set $%s or pass --addr", EnvPort)
	}
	if !portNumber(port) {
		return "", usagef("$%s must be a port number, got %q", EnvPort, port)
	}
	// On a pod, listen on the pod's address: probes and endpoints reach the
	// pod IP, and on a process node every pod shares the machine's ports.
	host := "127.0.0.1"
	if ip := net.ParseIP(os.Getenv(EnvPodIP)); ip != nil {
		host = ip.String()
	}
	return net.JoinHostPort(host, port), nil
}

func portNumber(s string) bool {
	p, err := strconv.Atoi(s)
	return err == nil && p >= 0 && p <= 65535
}

// List writes the table of functions.
func List(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSERVES\tSIZES (IN -> OUT)\tWHAT IT DOES")
	for _, name := range functions.Names() {
		a, err := functions.Describe(name)
		if err != nil {
			return err
		}
		what := a.Summary
		if a.AliasOf != "" {
			what = "alias of " + a.AliasOf
		}
		fmt.Fprintf(tw, "%s\t%s\t%s -> %s\t%s\n", a.Name, strings.Join(a.Serves, ", "), a.InUnit, a.OutUnit, what)
	}
	return tw.Flush()
}
