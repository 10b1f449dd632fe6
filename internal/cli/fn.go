package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/examples/functions"
)

// Environment variables a stack file sets instead of flags: PORT as
// of-watchdog reads it, the others for replay.
const (
	envPort     = "PORT"
	envPodIP    = "POD_IP"
	envApp      = "GANTRY_APP"
	envFunction = "GANTRY_FUNCTION"
	envSeed     = "GANTRY_SEED"
)

type fnFlags struct {
	addr, app, function string
	seed                uint64
	drain               time.Duration
	list                bool
}

func newFnCmd() *cobra.Command {
	f := &fnFlags{}
	cmd := &cobra.Command{
		Use:   "fn NAME",
		Short: "Serve one example function over HTTP in OpenFaaS of-watchdog's HTTP mode",
		Long: `Serve one example function: POST / runs it on the request body, GET /_/health
answers 200 once ready, and SIGTERM drains in-flight requests before exiting.
X-Input-Size and X-Output-Size carry input and output sizes (examples/README.md).`,
		Example: `  PORT=8081 gantry fn sentiment
  gantry fn image-compress --addr 127.0.0.1:8082
  gantry fn replay --app audio-translation --function speech-to-text --addr 127.0.0.1:8083
  gantry fn --list`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.list {
				return listFns(cmd, args)
			}
			return runFn(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "", "listen address (default $POD_IP:$PORT, or 127.0.0.1:$PORT without POD_IP)")
	fl.BoolVar(&f.list, "list", false, "list the functions and the apps they serve")
	fl.StringVar(&f.app, "app", "", "replay only: the app (default $"+envApp+")")
	fl.StringVar(&f.function, "function", "", "replay only: the app's function, by name or 0-based index (default $"+envFunction+")")
	fl.Uint64Var(&f.seed, "seed", 0, "replay only: seed of the noise, 0 for a random one (default $"+envSeed+")")
	fl.DurationVar(&f.drain, "drain", functions.DefaultDrain, "on SIGTERM, how long in-flight requests may run before they are cut off")
	return cmd
}

func runFn(cmd *cobra.Command, f *fnFlags, args []string) error {
	if len(args) == 0 {
		return usagef("name a function; gantry fn --list shows them")
	}
	name := args[0]
	if _, err := functions.Describe(name); err != nil {
		return usageError{err}
	}
	if f.drain <= 0 {
		return usagef("--drain must be positive, got %v", f.drain)
	}
	opts, err := f.options(cmd, name)
	if err != nil {
		return err
	}
	addr, err := f.listenAddr()
	if err != nil {
		return err
	}
	h, err := functions.Handler(name, opts...)
	if err != nil {
		if errors.Is(err, functions.ErrBadOption) {
			return usageError{err}
		}
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(cmd.Context(), "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "gantry fn %s: listening on http://%s\n", name, ln.Addr())
	return functions.Serve(cmd.Context(), ln, h, f.drain)
}

// options builds replay's options from flags, falling back to the
// environment, and rejects replay flags on any other function.
func (f *fnFlags) options(cmd *cobra.Command, name string) ([]functions.Option, error) {
	changed := cmd.Flags().Changed
	if name != "replay" {
		if changed("app") || changed("function") || changed("seed") {
			return nil, usagef("--app, --function and --seed only apply to replay")
		}
		return nil, nil
	}
	app, fn := orEnv(f.app, envApp), orEnv(f.function, envFunction)
	if app == "" || fn == "" {
		return nil, usagef("replay needs --app (or $%s) and --function (or $%s)", envApp, envFunction)
	}
	seed := f.seed
	if v := os.Getenv(envSeed); !changed("seed") && v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, usagef("$%s must be an unsigned integer, got %q", envSeed, v)
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
func (f *fnFlags) listenAddr() (string, error) {
	if f.addr != "" {
		return f.addr, nil
	}
	port := os.Getenv(envPort)
	if port == "" {
		return "", usagef("set $%s or pass --addr", envPort)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "", usagef("$%s must be a port number, got %q", envPort, port)
	}
	// On a pod, listen on the pod's address: probes and endpoints reach the
	// pod IP, and on a process node every pod shares the machine's ports.
	host := "127.0.0.1"
	if ip := net.ParseIP(os.Getenv(envPodIP)); ip != nil {
		host = ip.String()
	}
	return net.JoinHostPort(host, port), nil
}

func listFns(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("--list takes no function name")
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
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
