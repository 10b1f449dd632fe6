package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

// platformFlags are the gateway and autoscaler settings serve and up share.
type platformFlags struct {
	policy       string
	capacity     int
	startDelay   time.Duration
	startTimeout time.Duration
	tick         time.Duration
	window       time.Duration
	idleTimeout  time.Duration
	maxBody      int64
	drainTimeout time.Duration
	sloTarget    float64
	instanceLogs bool
	limits       gateway.Limits
	fnRuntime    string
}

func (f *platformFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.policy, "policy", "gantry", fmt.Sprintf("policy of the core that scales and orders queues: one of %v", policy.Names()))
	fs.IntVar(&f.capacity, "capacity", 0, "most instances of all functions together (0: no bound); when full, critical functions take capacity from less critical ones")
	fs.DurationVar(&f.startDelay, "start-delay", 0, "added before each instance starts, to emulate a container's start-up (e.g. 1.5s as in the Cypress paper)")
	fs.DurationVar(&f.startTimeout, "start-timeout", 30*time.Second, "how long an instance may take to get ready (to answer GET "+backend.HealthPath+" below 500) before its start fails; one that exits, answers 500 there or listens on another port than $PORT fails sooner")
	fs.DurationVar(&f.tick, "tick", policy.DefaultTick, "how often the autoscaler plans (the simulator's default too)")
	fs.DurationVar(&f.window, "window", policy.DefaultWindow, "the proactive scaler's window")
	fs.Float64Var(&f.sloTarget, "slo-target", 100*policy.DefaultSLOTarget, "percent of requests that must meet their SLO, for functions whose stack declares no slo_target: the gantry policy sizes for it")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", policy.DefaultIdleTimeout, "stop instances idle this long beyond a function's minimum (the simulator's default too)")
	fs.Int64Var(&f.maxBody, "max-body", gateway.DefaultMaxBody, "largest request or response body in bytes (413 past it)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long accepted requests may take to finish")
	fs.StringVar(&f.fnRuntime, "fn-runtime", "", "the slim example-functions runtime that stack commands \"gantry fn ...\" run, for fast cold starts (default: "+
		backend.FnRuntimeName+" beside this binary, which make build puts there, if any; "+backend.NoFnRuntime+": this binary)")
	fs.BoolVar(&f.instanceLogs, "instance-logs", false, "copy the instances' stdout and stderr to stderr, prefixed with the instance")
	fs.DurationVar(&f.limits.ReadHeader, "read-header-timeout", 10*time.Second, "how long a client may take to send a request's headers")
	fs.DurationVar(&f.limits.BodyIdle, "body-idle-timeout", 30*time.Second, "longest gap between two pieces of a request body (408 past it)")
	fs.DurationVar(&f.limits.Body, "body-timeout", 0, "how long a client may take to send a whole request body (0: the function's timeout)")
	fs.DurationVar(&f.limits.WriteExtra, "write-timeout-extra", 5*time.Second, "a client must take an answer within the function's timeout plus this, from its first byte")
	fs.DurationVar(&f.limits.Idle, "keepalive-timeout", 90*time.Second, "how long an idle keep-alive connection stays open")
}

func (f *platformFlags) validate() error {
	if err := dispatch.CheckPolicy(f.policy); err != nil {
		return usagef("--policy: %v", err)
	}
	switch {
	case f.capacity < 0 || f.capacity > stack.MaxInstances*10:
		return usagef("--capacity must be in [0, %d], got %d", stack.MaxInstances*10, f.capacity)
	case f.startDelay < 0 || f.startDelay > 10*time.Minute:
		return usagef("--start-delay must be in [0, 10m], got %v", f.startDelay)
	case f.startTimeout < 100*time.Millisecond || f.startTimeout > time.Hour:
		return usagef("--start-timeout must be in [100ms, 1h], got %v", f.startTimeout)
	case f.tick < 10*time.Millisecond || f.tick > time.Minute:
		return usagef("--tick must be in [10ms, 1m], got %v", f.tick)
	case f.window < time.Second || f.window > time.Hour:
		return usagef("--window must be in [1s, 1h], got %v", f.window)
	case !(f.sloTarget > 1 && f.sloTarget < 100):
		// A value of 1 or less is almost surely a fraction (0.999 for
		// 99.9%): taken as a percentage it would size for nearly no SLO.
		return usagef("--slo-target must be a percentage in (1, 100), e.g. 99.9, got %v", f.sloTarget)
	case f.idleTimeout < time.Second || f.idleTimeout > 24*time.Hour:
		return usagef("--idle-timeout must be in [1s, 24h], got %v", f.idleTimeout)
	case f.maxBody < 1 || f.maxBody > 1<<30:
		return usagef("--max-body must be in [1, %d], got %d", 1<<30, f.maxBody)
	case f.drainTimeout <= 0 || f.drainTimeout > time.Hour:
		return usagef("--drain-timeout must be in (0, 1h], got %v", f.drainTimeout)
	}
	if f.fnRuntime != "" && f.fnRuntime != backend.NoFnRuntime {
		if st, err := os.Stat(f.fnRuntime); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return usagef("--fn-runtime %s: not an executable file (%v)", f.fnRuntime, err)
		}
	}
	for _, d := range []struct {
		flag     string
		v        time.Duration
		zeroOK   bool
		min, max time.Duration
	}{
		{"--read-header-timeout", f.limits.ReadHeader, false, 10 * time.Millisecond, 10 * time.Minute},
		{"--body-idle-timeout", f.limits.BodyIdle, false, 10 * time.Millisecond, time.Hour},
		{"--body-timeout", f.limits.Body, true, 10 * time.Millisecond, time.Hour},
		{"--write-timeout-extra", f.limits.WriteExtra, false, 10 * time.Millisecond, time.Hour},
		{"--keepalive-timeout", f.limits.Idle, false, 10 * time.Millisecond, 24 * time.Hour},
	} {
		if (d.v == 0 && d.zeroOK) || (d.v >= d.min && d.v <= d.max) {
			continue
		}
		return usagef("%s must be in [%v, %v], got %v", d.flag, d.min, d.max, d.v)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// serverConfig assembles the local runtime, dispatcher and gateway.
func (f *platformFlags) serverConfig(addr string, s *stack.Stack, logger *slog.Logger) gateway.ServerConfig {
	var instLog io.Writer = io.Discard
	if f.instanceLogs {
		instLog = os.Stderr
	}
	be := backend.NewLocal(backend.LocalConfig{StartDelay: f.startDelay, ReadyTimeout: f.startTimeout, Log: instLog, Logger: logger, FnRuntime: f.fnRuntime})
	return gateway.ServerConfig{Addr: addr, Stack: s, Backend: be,
		Dispatch: dispatch.Config{Policy: f.policy, Capacity: f.capacity, Tick: f.tick, Window: f.window,
			IdleTimeout: f.idleTimeout, SLOTarget: f.sloTarget / 100, Logger: logger},
		Gateway: gateway.Config{MaxBody: f.maxBody, Logger: logger}, Limits: f.limits}
}

// backendFlags choose where serve runs instances: local processes (the
// default, what serverConfig builds) or pods on Kubernetes.
type backendFlags struct {
	kind         string
	kubeconfig   string
	namespace    string
	nodeSelector map[string]string
	// peers is the Service of a scaled-out gateway's replicas; podName
	// this replica's pod.
	peers, podName string
	// readyTimeout is --start-timeout when given (0: the backend's
	// default).
	readyTimeout time.Duration
	// knative: --knative-ingress reads the kubeconfig too.
	knative bool
	// Set by apply (serve_kube.go): the Kubernetes backend and, for a
	// scaled-out gateway, its replica.
	k kubeBackend
}

const (
	backendLocal      = "local"
	backendKubernetes = "kubernetes"
)

func (f *backendFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.kind, "backend", backendLocal, "where instances run: local (processes on this machine) or kubernetes (an RTResource or Deployment per function)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "with --backend kubernetes: kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)")
	fs.StringVar(&f.namespace, "namespace", "", "with --backend kubernetes: namespace of the functions (default: the kubeconfig context's, else default)")
	fs.StringToStringVar(&f.nodeSelector, "node-selector", nil, "with --backend kubernetes: nodeSelector of every function pod, e.g. type=process where not every node can serve")
	fs.StringVar(&f.peers, "peers", "", "with --backend kubernetes: run as one replica of a scaled-out gateway; the Service whose endpoints are the replicas (a Lease of that name elects the one that scales)")
	fs.StringVar(&f.podName, "pod-name", os.Getenv("POD_NAME"), "with --peers: this replica's pod name, as the Service's endpoints name it (default $POD_NAME)")
}

func (f *backendFlags) validate() error {
	switch {
	case f.kind != backendLocal && f.kind != backendKubernetes:
		return usagef("--backend must be %s or %s, got %q", backendLocal, backendKubernetes, f.kind)
	case !fullBuild && (f.kind == backendKubernetes || (f.kubeconfig != "" && !f.knative) || f.namespace != "" || len(f.nodeSelector) > 0 || f.peers != ""):
		return notInThisBuild("serve's Kubernetes backend (--backend " + backendKubernetes + ", --kubeconfig, --namespace, --node-selector, --peers)")
	case f.kind == backendLocal && ((f.kubeconfig != "" && !f.knative) || f.namespace != "" || len(f.nodeSelector) > 0 || f.peers != ""):
		return usagef("--kubeconfig, --namespace, --node-selector and --peers need --backend %s (--kubeconfig also goes with --knative-ingress)", backendKubernetes)
	case f.peers != "" && f.podName == "":
		return usagef("--peers needs this replica's pod name: --pod-name, or $POD_NAME from the downward API")
	}
	if f.peers != "" {
		if errs := validation.IsDNS1035Label(f.peers); len(errs) > 0 {
			return usagef("--peers: service name %q: %s", f.peers, strings.Join(errs, "; "))
		}
	}
	for k, v := range f.nodeSelector {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return usagef("--node-selector: label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return usagef("--node-selector: label value %q: %s", v, strings.Join(errs, "; "))
		}
	}
	return nil
}

// localOnly refuses the flags that only the local runtime honours when
// instances run elsewhere, rather than ignoring them.
func localOnly(cmd *cobra.Command, kind string) error {
	if kind == backendLocal {
		return nil
	}
	for _, name := range []string{"start-delay", "fn-runtime", "instance-logs"} {
		if cmd.Flags().Changed(name) {
			return usagef("--%s is for the local runtime's processes; with --backend %s, pods start as the cluster starts them", name, kind)
		}
	}
	return nil
}

func newServeCmd() *cobra.Command {
	var (
		pf                   platformFlags
		bf                   backendFlags
		af                   asyncFlags
		kf                   knativeIngressFlags
		addr, stackFile      string
		stateDir             string
		basicAuth, tokenFile string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve functions: an OpenFaaS-compatible gateway with Gantry's autoscaler on local processes or Kubernetes (--backend)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pf.validate(); err != nil {
				return err
			}
			bf.knative = kf.enabled
			if err := bf.validate(); err != nil {
				return err
			}
			if err := af.validate(); err != nil {
				return err
			}
			if err := kf.validate(); err != nil {
				return err
			}
			if err := localOnly(cmd, bf.kind); err != nil {
				return err
			}
			bf.readyTimeout = pf.startTimeout
			if !cmd.Flags().Changed("start-timeout") {
				bf.readyTimeout = 0 // the backend's own default
			}
			// A credentials file that cannot serve is a usage error, found
			// before anything starts.
			var auth *gateway.Auth
			if basicAuth != "" || tokenFile != "" {
				var err error
				if auth, err = gateway.LoadAuth(basicAuth, tokenFile); err != nil {
					return usagef("--basic-auth-file/--token-file: %v", err)
				}
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
			var s *stack.Stack
			if stackFile != "" {
				var err error
				if s, err = stack.ParseFile(stackFile); err != nil {
					return err
				}
			}
			state, closeState, err := openState(stateDir, addr)
			if err != nil {
				return err
			}
			defer closeState()
			logger.Info("state folder", "path", state.Path())
			if err := claimStateBackend(state.Path(), bf.kind); err != nil {
				return err
			}
			cfg := pf.serverConfig(addr, s, logger)
			cfg.State = state
			cfg.Async = af.config()
			if err := bf.apply(&cfg, logger); err != nil {
				return err
			}
			if auth != nil {
				cfg.Gateway.Auth = auth
			} else {
				logger.Warn("management routes are open: pass --basic-auth-file or --token-file to protect them")
			}
			if err := kf.start(bf.kubeconfig, logger); err != nil {
				return err
			}
			srv, err := gateway.Start(cmd.Context(), cfg)
			if err != nil {
				return errors.Join(err, kf.shutdown(context.Background()))
			}
			logger.Info("gateway listening", "url", srv.URL(), "policy", pf.policy, "functions", len(srv.D.Functions()))
			// A leader keeps its Lease while it drains, so no other replica
			// decides beside it; one that loses the Lease stops, to be
			// restarted as a follower.
			campaign, stopCampaign := context.WithCancel(context.Background())
			defer stopCampaign()
			var leadErr error
			done := make(chan struct{})
			if bf.peers != "" {
				go func() {
					defer close(done)
					leadErr = bf.campaign(campaign, cfg, srv, logger)
				}()
			}
			select {
			case <-cmd.Context().Done():
			case <-done:
			}
			logger.Info("draining: a second signal stops at once", "timeout", pf.drainTimeout)
			// The first signal drains; a second cuts the drain short. Open
			// requests are answered either way. A drain that began
			// without a signal (the Lease lost) is cut short by the first.
			again := secondSignal(cmd.Context())
			if cmd.Context().Err() == nil {
				again = cmd.Context().Done()
			}
			drained := make(chan struct{})
			defer close(drained)
			go func() {
				select {
				case <-again:
					logger.Info("second signal: answering open requests and stopping now")
					srv.Hurry()
					kf.hurry()
				case <-drained:
				}
			}()
			dctx, cancel := context.WithTimeout(context.Background(), pf.drainTimeout)
			defer cancel()
			ingressDone := make(chan error, 1)
			go func() { ingressDone <- kf.shutdown(dctx) }()
			err = errors.Join(srv.Shutdown(dctx), <-ingressDone)
			stopCampaign()
			if bf.peers != "" {
				<-done
			}
			return errors.Join(err, leadErr)
		},
	}
	pf.register(cmd)
	bf.register(cmd)
	af.register(cmd)
	kf.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&stateDir, "state-dir", "", "the gateway's state folder: what must survive a restart (default $XDG_STATE_HOME/gantry/HOST_PORT or ~/.local/state/gantry/HOST_PORT, from --addr); one gateway per folder")
	fs.StringVar(&stackFile, "stack", "", "stack file (YAML, close to OpenFaaS's stack.yml) of functions and apps to deploy")
	fs.StringVar(&basicAuth, "basic-auth-file", "", "file holding user:password that management routes require")
	fs.StringVar(&tokenFile, "token-file", "", "file holding a bearer token that management routes accept")
	return cmd
}

// openState opens and locks the state folder: the flag's, else the default
// for the listen address, so the same command line finds the same state. A
// gateway on port 0 has no stable address, so by default it gets a fresh
// folder that goes when it stops.
func openState(dir, addr string) (*statedir.Dir, func() error, error) {
	if dir == "" {
		if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
			d, err := statedir.Temp()
			if err != nil {
				return nil, nil, err
			}
			return d, d.Remove, nil
		}
		var err error
		if dir, err = statedir.Default(addr); err != nil {
			return nil, nil, usagef("--state-dir: %v", err)
		}
	}
	d, err := statedir.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	return d, d.Close, nil
}
