package processnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry.dev/gantry/pkg/childproc"
	"gantry.dev/gantry/pkg/ctxtime"
)

// exitStartError is the exit code of a run whose program could not start.
const exitStartError = 128

// container is one container of a pod: a loop that runs its program,
// restarts it as the pod's restart policy says with a growing back-off,
// and probes it while it runs. Its status fields are guarded by the pod's
// mutex.
type container struct {
	r      *podRun
	spec   corev1.Container
	env    []string
	mounts []mount // bind mounts in the pod's mount namespace, if it has one

	status    corev1.ContainerStatus // guarded by r.mu
	final     bool                   // guarded by r.mu: it will not run again
	cur, prev *runLog                // guarded by r.mu
}

// loop runs the container until the pod stops or the restart policy says
// it is done.
func (c *container) loop() {
	defer c.r.loops.Done()
	cfg := c.r.p.cfg
	backoff := cfg.BackoffMin
	for {
		ran, code := c.runOnce()
		policy := c.r.restartPolicy()
		restart := policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0)
		if c.r.isStopping() || !restart {
			c.r.setFinal(c)
			return
		}
		if ran >= cfg.BackoffReset {
			backoff = cfg.BackoffMin
		}
		c.r.update(func() {
			c.status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason:  "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container %s", backoff, c.spec.Name),
			}}
		})
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-c.r.stopCh:
			t.Stop()
			c.r.setFinal(c)
			return
		}
		backoff = min(2*backoff, cfg.BackoffMax)
	}
}

// program resolves the argv of the container: its command and args as
// Kubernetes defines them, the image's entry in the node's image map
// standing in for the image's entrypoint when there is no command.
func (c *container) program() ([]string, string, error) {
	argv := append([]string{}, c.spec.Command...)
	if len(argv) == 0 {
		entry, ok := c.r.p.cfg.Images[c.spec.Image]
		if name, fn := gantryFn(c.spec.Image); !ok && fn {
			entry, ok = []string{"gantry", "fn", name}, true
			if c.r.netns != "" {
				// The pod's own addresses: queue-proxy dials 127.0.0.1,
				// probes and endpoints the pod IP.
				entry = append(entry, "--addr", ":$(PORT)")
			}
		}
		if !ok {
			return nil, "", fmt.Errorf("container %s has no command and image %q has no program on this node (the node runs programs, it pulls no images)", c.spec.Name, c.spec.Image)
		}
		argv = append(argv, entry...)
	}
	argv = append(argv, c.spec.Args...)
	if len(argv) == 0 {
		return nil, "", fmt.Errorf("container %s: empty command", c.spec.Name)
	}
	vals := map[string]string{}
	for _, kv := range c.env {
		k, v, _ := cut(kv)
		vals[k] = v
	}
	for i := range argv {
		argv[i] = expandVars(argv[i], vals)
	}
	path, err := lookPath(argv[0], c.env, c.workDir())
	if err != nil {
		return nil, "", err
	}
	return argv, path, nil
}

// gantryFnImage is the prefix of images that run an example function:
// dev.local/gantry-fn:NAME runs `gantry fn NAME`, on $PORT (Knative's
// user-container contract), so any example function can be a Knative
// Service with no image build. dev.local/ is a prefix Knative does not
// resolve to a digest.
const gantryFnImage = "dev.local/gantry-fn:"

// gantryFn is the function an image names, if it is a gantry-fn image.
func gantryFn(image string) (string, bool) {
	name, ok := strings.CutPrefix(image, gantryFnImage)
	return name, ok && programName.MatchString(name)
}

func cut(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

func (c *container) workDir() string {
	if c.spec.WorkingDir != "" {
		return c.spec.WorkingDir
	}
	return c.r.dir
}

// runOnce runs the program once, to its exit, and records how it ended.
func (c *container) runOnce() (ran time.Duration, code int) {
	r := c.r
	lg, err := c.newLog()
	if err != nil {
		c.terminated(time.Now(), time.Now(), exitStartError, "StartError", err.Error(), 0)
		return 0, exitStartError
	}
	argv, path, err := c.program()
	var cmd *exec.Cmd
	var pr *os.File
	if err == nil {
		cmd, pr, err = c.start(argv, path, lg)
	}
	if err != nil {
		lg.record(time.Now(), []byte("processnode: "+err.Error()+"\n"))
		lg.close()
		now := time.Now()
		c.terminated(now, now, exitStartError, "StartError", err.Error(), 0)
		r.p.cfg.Logger.Warn("container did not start", "pod", r.key, "container", c.spec.Name, "err", err)
		return 0, exitStartError
	}
	started := time.Now()
	pid := cmd.Process.Pid
	copied := make(chan struct{})
	go func() { lg.copyFrom(pr); close(copied) }()
	r.update(func() {
		c.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
		c.status.ContainerID = "process://" + strconv.Itoa(pid)
		c.status.Ready = false
		c.status.Started = ptrBool(c.spec.StartupProbe == nil)
	})

	probeCtx, stopProbes := context.WithCancel(context.Background())
	probeKill := make(chan string, 1)
	probesDone := make(chan struct{})
	go func() {
		defer close(probesDone)
		c.probe(probeCtx, probeKill)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	stopCh, killCh := r.stopCh, r.killCh
	var graceC <-chan time.Time
	reason := ""
	for waiting := true; waiting; {
		select {
		case <-exited:
			waiting = false
		case <-stopCh:
			signalGroup(pid, syscall.SIGTERM)
			stopCh = nil
		case <-killCh:
			signalGroup(pid, syscall.SIGKILL)
			killCh = nil
		case why := <-probeKill:
			reason = why
			r.p.cfg.Logger.Info("killing container", "pod", r.key, "container", c.spec.Name, "reason", why)
			signalGroup(pid, syscall.SIGTERM)
			t := time.NewTimer(r.probeKillGrace(c))
			defer t.Stop()
			graceC = t.C
		case <-graceC:
			signalGroup(pid, syscall.SIGKILL)
			graceC = nil
		}
	}
	finished := time.Now()
	// Whatever the program left in its group goes with it, so nothing
	// outlives the container and the log pipe's writers all close.
	signalGroup(pid, syscall.SIGKILL)
	stopProbes()
	<-probesDone
	select {
	case <-copied:
	case <-time.After(time.Second): // a process that left the group still holds the pipe
		pr.Close()
		<-copied
	}
	pr.Close()
	lg.close()

	code = exitCode(cmd.ProcessState)
	why := "Completed"
	if code != 0 {
		why = "Error"
	}
	msg := ""
	if reason != "" {
		msg = reason
	}
	c.terminated(started, finished, code, why, msg, pid)
	return finished.Sub(started), code
}

// start starts the program with its output on a pipe to the run's log.
func (c *container) start(argv []string, path string, lg *runLog) (*exec.Cmd, *os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		pr.Close()
		pw.Close()
		return nil, nil, err
	}
	defer devnull.Close()
	if ns := c.r.netns; ns != "" {
		if path, argv, err = netnsArgv(ns, path, argv, c.mounts); err != nil {
			pr.Close()
			pw.Close()
			return nil, nil, err
		}
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: c.env, Dir: c.workDir(),
		Stdin: devnull, Stdout: pw, Stderr: pw, SysProcAttr: childproc.Attr()}
	err = startCmd(cmd)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, nil, err
	}
	return cmd, pr, nil
}

// newLog opens the log of the next run; the previous run's stays readable
// (kubectl logs --previous), older ones are removed.
func (c *container) newLog() (*runLog, error) {
	r := c.r
	r.mu.Lock()
	restarts := c.status.RestartCount
	if c.cur != nil {
		restarts++
	}
	r.mu.Unlock()
	path := filepath.Join(r.dir, fmt.Sprintf("%s-%d.log", c.spec.Name, restarts))
	lg, err := newRunLog(path, r.p.cfg.MaxLogBytes)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	old := c.prev
	c.prev, c.cur = c.cur, lg
	if c.prev != nil {
		c.status.RestartCount++
	}
	r.mu.Unlock()
	if old != nil {
		_ = os.Remove(old.path)
	}
	return lg, nil
}

// terminated records the end of a run.
func (c *container) terminated(started, finished time.Time, code int, reason, msg string, pid int) {
	c.r.update(func() {
		t := &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, Message: msg,
			StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(finished)}
		if pid > 0 {
			t.ContainerID = "process://" + strconv.Itoa(pid)
		}
		c.status.LastTerminationState = corev1.ContainerState{Terminated: t}
		c.status.State = corev1.ContainerState{Terminated: t.DeepCopy()}
		c.status.Ready = false
		c.status.Started = ptrBool(false)
	})
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return exitStartError
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func ptrBool(b bool) *bool { return &b }

// probe runs the container's probes while its run lasts: the startup probe
// first, then readiness and liveness side by side. A failed startup or
// liveness verdict asks the run to kill the program through kill.
func (c *container) probe(ctx context.Context, kill chan<- string) {
	r := c.r
	t := probeTarget{ip: r.ipString(), ports: c.spec.Ports, env: c.env, dir: c.workDir(), netns: r.netns, mounts: c.mounts}
	if sp := c.spec.StartupProbe; sp != nil {
		ok, err := probeUntilVerdict(ctx, sp, t)
		if ctx.Err() != nil {
			return
		}
		if !ok {
			kill <- fmt.Sprintf("startup probe failed: %v", err)
			return
		}
		r.update(func() { c.status.Started = ptrBool(true) })
	}
	if c.spec.ReadinessProbe == nil {
		r.update(func() { c.status.Ready = true })
	}
	var wg sync.WaitGroup
	if rp := c.spec.ReadinessProbe; rp != nil {
		wg.Go(func() {
			watchProbe(ctx, rp, t, func(passing bool, _ error) bool {
				r.update(func() { c.status.Ready = passing && !r.stopping })
				return true
			}, unreadyRetry)
		})
	}
	if lp := c.spec.LivenessProbe; lp != nil {
		wg.Go(func() {
			watchProbe(ctx, lp, t, func(passing bool, err error) bool {
				if passing {
					return true
				}
				kill <- fmt.Sprintf("liveness probe failed: %v", err)
				return false
			}, 0)
		})
	}
	wg.Wait()
}

// probeUntilVerdict runs p until its thresholds reach a verdict.
func probeUntilVerdict(ctx context.Context, p *corev1.Probe, t probeTarget) (bool, error) {
	var verdict, last error
	ok := false
	watchProbe(ctx, p, t, func(passing bool, err error) bool {
		ok, verdict = passing, err
		return false
	}, 0)
	if verdict != nil {
		last = verdict
	}
	return ok, last
}

// unreadyRetry is how soon a readiness probe that is not passing runs
// again when its period is longer. The kubelet reruns an unready
// container's readiness probe at once on every pod status sync
// (prober_manager.go's UpdatePodStatus), which its PLEG's 1 s relist
// drives while a pod's containers start; without it a probe that comes
// before the program listens (Knative's queue-proxy: no periodSeconds,
// defaulted to 10) leaves the pod unready for a whole period.
const unreadyRetry = time.Second

// watchProbe runs p every period after its initial delay and calls on
// with each new verdict, until ctx is done or on returns false. While the
// probe is not passing it runs at least every retry (0: only every
// period).
func watchProbe(ctx context.Context, p *corev1.Probe, t probeTarget, on func(passing bool, err error) bool, retry time.Duration) {
	st := probeState{probe: p}
	if ctxtime.Sleep(ctx, time.Duration(p.InitialDelaySeconds)*time.Second) != nil {
		return
	}
	for {
		err := runProbe(ctx, p, t)
		if ctx.Err() != nil {
			return
		}
		if st.observe(err) && !on(st.passing, err) {
			return
		}
		wait := st.period()
		if retry > 0 && !st.passing && retry < wait {
			wait = retry
		}
		if ctxtime.Sleep(ctx, wait) != nil {
			return
		}
	}
}
