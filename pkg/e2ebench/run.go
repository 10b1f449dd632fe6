package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/backend/kube"
	"gantry.dev/gantry/pkg/ctxtime"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/localcluster"
	"gantry.dev/gantry/pkg/orchbench"
	"gantry.dev/gantry/pkg/processnode"
	"gantry.dev/gantry/pkg/rtclient"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/trace"
)

// ErrNotRouted is returned when the process node's pod addresses are
// loopback ones, which EndpointSlices refuse: this process could not make
// the pods' network namespaces (CAP_NET_ADMIN and CAP_SYS_ADMIN, iproute2).
var ErrNotRouted = errors.New("the process node's pod addresses are not routable")

// functionName is the critical function's name.
const functionName = "sentiment"

// Sample is one request's outcome.
type Sample struct {
	Orchestrator string
	OffsetS      float64 // intended send time since the load started
	LatencyMs    float64 // meaningful only when Measured
	Measured     bool
	Status       int
	Kind         string
}

// Run starts the local control plane, measures each orchestrator in turn
// and tears everything down. A cancelled ctx stops it promptly and returns
// what was measured with Interrupted set.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "e2e: "+format+"\n", args...)
		}
	}
	c, err := localcluster.Start(ctx, localcluster.Options{
		Nodes: opts.Nodes, ProcessNodes: 1, Scheduler: true, ControllerManager: true,
		Programs: map[string]string{"gantry": opts.Program}, Progress: opts.Progress,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("stopping the local control plane")
		_ = c.Stop()
	}()
	// An interrupt stops the control plane at once, beside the run's own
	// unwinding, which then meets closed connections instead of waiting:
	// nothing of the run outlives the cluster, so within a second.
	defer context.AfterFunc(ctx, func() { _ = c.Stop() })()
	for _, n := range c.ProcessNodes() {
		if !n.Routed() {
			return nil, fmt.Errorf("%w: node %s has %s", ErrNotRouted, n.Name(), n.Addresses())
		}
	}
	cfg := c.RESTConfig()
	if err := orchbench.InstallController(ctx, cfg, opts.CRDPath, opts.ConfigDir); err != nil {
		return nil, fmt.Errorf("install the CRD and the controller's RBAC and APF objects: %w", err)
	}
	rep := &Report{Options: opts}
	for _, orch := range opts.Orchestrators {
		run, samples, err := runOne(ctx, cfg, opts, orch, logf)
		if run != nil {
			rep.Runs = append(rep.Runs, *run)
			rep.Samples = append(rep.Samples, samples...)
		}
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", orch, err)
		}
	}
	rep.Interrupted = ctx.Err() != nil
	return rep, nil
}

// interruptGrace is how long an interrupted run waits for its requests in
// flight and for the gateway's shutdown: the whole run stops within a second.
const interruptGrace = 200 * time.Millisecond

// runOne deploys the function for one orchestrator, warms it, drives it
// under churn and removes it again.
func runOne(ctx context.Context, cfg *rest.Config, opts Options, orch string, logf func(string, ...any)) (*Row, []Sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	driver := rest.CopyConfig(cfg)
	driver.QPS, driver.Burst = -1, 0
	driver.UserAgent = "gantry-e2ebench"
	kc, err := kubernetes.NewForConfig(driver)
	if err != nil {
		return nil, nil, err
	}
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1000000)
	fnNS, churnNS := "e2ebench-"+orch+"-"+suffix, "e2ebench-churn-"+orch+"-"+suffix
	defer deleteNamespaces(ctx, kc, logf, fnNS, churnNS)
	for _, ns := range []string{fnNS, churnNS} {
		if err := createNamespace(ctx, kc, ns); err != nil {
			return nil, nil, err
		}
	}

	var ctlDone <-chan error
	if orch == Gantry {
		app := opts.Controller
		if app.Pool.Logger == nil {
			// Its shutdown warnings (one per churn object in flight)
			// would bury the progress lines.
			app.Pool.Logger = slog.New(slog.DiscardHandler)
		}
		ctlDone = orchbench.StartController(ctx, cfg, app)
		defer func() {
			cancel()
			if err := <-ctlDone; err != nil && !errors.Is(err, context.Canceled) {
				logf("gantry controller: %v", err)
			}
		}()
	}

	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	be, err := kube.New(cfg, fnNS, kube.Options{Port: port, OnClose: kube.CloseDelete, ReadyTimeout: 2 * time.Minute,
		NodeSelector: map[string]string{processnode.LabelType: "process"}})
	if err != nil {
		return nil, nil, err
	}
	f := function(opts, orch)
	srv, err := gateway.Start(ctx, gateway.ServerConfig{Addr: "127.0.0.1:0", Backend: be,
		Stack:    &stack.Stack{Functions: []stack.Function{f}},
		Dispatch: dispatch.Config{Logger: slog.New(slog.DiscardHandler)},
		Gateway:  gateway.Config{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		return nil, nil, fmt.Errorf("start the gateway: %w", err)
	}
	defer func() {
		// The gateway deletes the function's object on the way out; an
		// interrupt gives it a moment, as the cluster is going too.
		d := 30 * time.Second
		if ctx.Err() != nil {
			// Open requests are answered at once, as on a second
			// SIGTERM, instead of within the gateway's 2 s.
			d = interruptGrace
			srv.Hurry()
		}
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), d)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}()
	url := srv.URL() + "/function/" + functionName

	logf("%s: deploying %s as a %s in %s, waiting for its first instance", orch, functionName, f.Kind, fnNS)
	start := time.Now()
	if err := warm(ctx, url); err != nil {
		return nil, nil, fmt.Errorf("the first instance never answered: %w", err)
	}
	logf("%s: first instance answered after %v", orch, time.Since(start).Round(100*time.Millisecond))

	churnCtx, stopChurn := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		churned int
	)
	inter := orchbench.Interference{Kube: kc, Namespace: churnNS, IntervalPeriod: opts.IntervalPeriod,
		NodeSelector: map[string]string{"type": "kwok"}}
	if orch == Gantry {
		rts, err := rtClients(driver)
		if err != nil {
			stopChurn()
			return nil, nil, err
		}
		inter.RTs = rts
	}
	wg.Go(func() { churned = inter.Run(churnCtx, orchbench.Case{Mode: opts.Mode, Burst: opts.Burst}) })
	// The churn runs a moment before the load, so the scale-up meets it.
	_ = ctxtime.Sleep(ctx, 2*time.Second) // an interrupt is seen by what follows

	tr, err := trace.Generate("poisson", opts.Rate, opts.Duration, opts.Seed)
	if err != nil {
		stopChurn()
		wg.Wait()
		return nil, nil, err
	}
	var (
		mu      sync.Mutex
		samples []Sample
	)
	logf("%s: %.0f requests/s for %v under %s churn at burst %d", orch, opts.Rate, opts.Duration, opts.Mode, opts.Burst)
	res, err := loadgen.Run(ctx, loadgen.Config{URL: url, Trace: tr, MinSize: opts.Size, MaxSize: opts.Size,
		Seed: opts.Seed, SLO: opts.SLO, Timeout: time.Minute, Drain: interruptGrace,
		ProgressEvery: 5 * time.Second,
		Progress: func(sent, done int64, elapsed, total time.Duration) {
			if ctx.Err() != nil {
				return
			}
			logf("   %s: %.0f of %.0f s, %d sent, %d done, %d ready instances", orch, elapsed.Seconds(), total.Seconds(), sent, done, instances(ctx, kc, fnNS))
		},
		OnSample: func(s loadgen.Sample) {
			mu.Lock()
			samples = append(samples, Sample{Orchestrator: orch, OffsetS: s.Offset.Seconds(),
				LatencyMs: float64(s.Latency) / float64(time.Millisecond), Measured: s.Measured, Status: s.Status, Kind: s.Kind})
			mu.Unlock()
		}})
	stopChurn()
	wg.Wait()
	if err != nil {
		return nil, nil, fmt.Errorf("load: %w", err)
	}
	run := newRun(orch, opts, res)
	run.ChurnObjects = churned
	logf("%s: %d requests, %d errors, p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, SLO %.1f%%, %d churn objects",
		orch, run.Requests, run.Errors, run.P50Ms, run.P95Ms, run.P99Ms, 100*run.SLOCompliance, churned)
	return &run, samples, nil
}

// function is the critical function as the orchestrator holds it.
func function(opts Options, orch string) stack.Function {
	kind := stack.KindRTResource
	if orch == Vanilla {
		kind = stack.KindDeployment
	}
	f := stack.Function{Name: functionName, Command: opts.Command, Image: "example.invalid/sentiment:1",
		Env: opts.Env, Criticality: opts.Criticality, MinScale: 1, MaxScale: opts.MaxScale, Concurrency: 1,
		SLO: opts.SLO, SizeHeader: loadgen.SizeHeader, MinSize: 1, MaxSize: 64, SizeSensitive: true,
		MaxQueue: 100000, Timeout: time.Minute, Kind: kind}
	f.Defaults()
	return f
}

func rtClients(cfg *rest.Config) (*rtclient.Clients, error) {
	scheme, err := rtclient.Scheme()
	if err != nil {
		return nil, err
	}
	return rtclient.New(cfg, scheme)
}

// warm sends one request until it succeeds: the minimum instance's cold
// start, before any load.
func warm(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 30 * time.Second}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return false, err
		}
		req.Header.Set(loadgen.SizeHeader, "1")
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("status %d", resp.StatusCode)
		}
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return err
}

// instances counts the function's ready pods, for the progress line.
func instances(ctx context.Context, kc kubernetes.Interface, ns string) int {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	list, err := kc.CoreV1().Pods(ns).List(qctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range list.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n
}

func createNamespace(ctx context.Context, kc kubernetes.Interface, ns string) error {
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return wait.PollUntilContextCancel(wctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := kc.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// deleteNamespaces deletes the run's namespaces and waits briefly for them
// to go, so the next run does not meet their garbage collection; an
// interrupted run leaves them to the cluster's stop.
func deleteNamespaces(ctx context.Context, kc kubernetes.Interface, logf func(string, ...any), names ...string) {
	if ctx.Err() != nil {
		return // interrupted: the cluster goes with the run
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, ns := range names {
		_ = kc.CoreV1().Namespaces().Delete(dctx, ns, metav1.DeleteOptions{})
	}
	if ctx.Err() != nil {
		return
	}
	logf("deleting namespaces %v", names)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	_ = wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, ns := range names {
			if _, err := kc.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// freePort is a port free on every address: a process listening on a
// wildcard address would hold it on every pod address too.
func freePort() (int32, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port), nil
}
