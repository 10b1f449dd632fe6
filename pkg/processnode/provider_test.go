package processnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Two pods listen on the same port, each on its own loopback address, with
// the environment a kubelet would give them.
func TestPodsListenOnTheirOwnAddresses(t *testing.T) {
	tn := newTestNode(t, 8)
	greeting := corev1.EnvVar{Name: "GREETING", Value: "hello $(HOSTNAME) $$(HOSTNAME)"}
	tn.create(t, servePod("a", greeting))
	tn.create(t, servePod("b", greeting))
	pa := tn.waitFor(t, "a", "ready", 10*time.Second, podReady)
	pb := tn.waitFor(t, "b", "ready", 10*time.Second, podReady)
	if pa.Status.PodIP == pb.Status.PodIP || pa.Status.PodIP == "" {
		t.Fatalf("pod IPs %q and %q, want two different addresses", pa.Status.PodIP, pb.Status.PodIP)
	}
	for _, p := range []*corev1.Pod{pa, pb} {
		if p.Status.Phase != corev1.PodRunning || p.Status.HostIP != HostIP {
			t.Errorf("pod %s: phase %s host %s", p.Name, p.Status.Phase, p.Status.HostIP)
		}
		code, body := get(t, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(testPort)))+"/")
		var env map[string]string
		if err := json.Unmarshal([]byte(body), &env); err != nil || code != 200 {
			t.Fatalf("GET pod %s: %d %q", p.Name, code, body)
		}
		if env["hostname"] != p.Name || env["podIP"] != p.Status.PodIP {
			t.Errorf("pod %s sees HOSTNAME %q POD_IP %q", p.Name, env["hostname"], env["podIP"])
		}
		if want := "hello " + p.Name + " $(HOSTNAME)"; env["greeting"] != want {
			t.Errorf("GREETING = %q, want %q", env["greeting"], want)
		}
		if !strings.HasPrefix(env["path"], tn.p.cfg.BinDir+":") {
			t.Errorf("PATH %q does not start with the node's bin folder", env["path"])
		}
		if !strings.Contains(env["cwd"], "ns_"+p.Name+"_uid-"+p.Name) {
			t.Errorf("working folder %q is not the pod's", env["cwd"])
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started {
			t.Errorf("container status %+v", cs)
		}
	}
}

// A container with no command runs what the node's image map names.
func TestImageMapStandsInForTheEntrypoint(t *testing.T) {
	tn := newTestNode(t, 4)
	pod := servePod("img")
	pod.Spec.Containers[0].Command = nil
	tn.create(t, pod)
	tn.waitFor(t, "img", "ready", 10*time.Second, podReady)

	unknown := servePod("unknown")
	unknown.Spec.Containers[0].Command = nil
	unknown.Spec.Containers[0].Image = "registry.example/nothing:1"
	tn.create(t, unknown)
	p := tn.waitFor(t, "unknown", "a start error", 10*time.Second, func(p *corev1.Pod) bool {
		t := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
		return t != nil && t.Reason == "StartError"
	})
	if msg := p.Status.ContainerStatuses[0].LastTerminationState.Terminated.Message; !strings.Contains(msg, "registry.example/nothing:1") {
		t.Errorf("start error %q does not name the image", msg)
	}
}

// Deleting a pod sends SIGTERM; a program that exits on it ends at once,
// one that ignores it is killed when the grace period is over, and
// nothing it started survives. The address is freed afterwards.
func TestDeleteTerminatesWithTheGracePeriod(t *testing.T) {
	tn := newTestNode(t, 4)
	tn.create(t, servePod("polite", corev1.EnvVar{Name: "TERM_DELAY", Value: "100ms"}))
	tn.create(t, servePod("stubborn", corev1.EnvVar{Name: "IGNORE_TERM", Value: "1"}, corev1.EnvVar{Name: "CHILD", Value: "1"}))
	polite := tn.waitFor(t, "polite", "ready", 10*time.Second, podReady)
	stubborn := tn.waitFor(t, "stubborn", "ready", 10*time.Second, podReady)
	childPid := 0
	if b, err := os.ReadFile(filepath.Join(tn.p.get("ns/stubborn").dir, "child.pid")); err == nil {
		childPid, _ = strconv.Atoi(string(b))
	}
	if childPid == 0 || !alive(childPid) {
		t.Fatalf("the helper's child is not running (pid %d)", childPid)
	}

	t0 := time.Now()
	tn.delete(t, "polite", 5)
	tn.delete(t, "stubborn", 1)
	p := tn.waitFor(t, "polite", "terminated", 5*time.Second, func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("a program that exits on SIGTERM took %v to stop", took)
	}
	if term := p.Status.ContainerStatuses[0].State.Terminated; term.ExitCode != 0 || podReady(p) {
		t.Errorf("polite pod: exit %d, ready %v", term.ExitCode, podReady(p))
	}
	s := tn.waitFor(t, "stubborn", "killed", 5*time.Second, func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	took := time.Since(t0)
	if code := s.Status.ContainerStatuses[0].State.Terminated.ExitCode; code != 137 {
		t.Errorf("stubborn pod exit code %d, want 137 (SIGKILL)", code)
	}
	if took < time.Second || took > 3*time.Second {
		t.Errorf("a program that ignores SIGTERM was killed after %v, want the 1 s grace period", took)
	}
	for _, pid := range []int{containerPid(t, polite), containerPid(t, stubborn), childPid} {
		if alive(pid) {
			t.Errorf("pid %d outlived its pod", pid)
		}
	}
	tn.gone(t, "polite", 2*time.Second)
	tn.gone(t, "stubborn", 2*time.Second)
	if n := tn.p.addrs.used(); n != 0 {
		t.Errorf("%d addresses still in use after both pods went", n)
	}
	tn.mu.Lock()
	removed := slices.Sorted(slices.Values(tn.removed))
	tn.mu.Unlock()
	if !slices.Equal(removed, []string{"polite", "stubborn"}) {
		t.Errorf("pod objects removed: %v, want both deleted pods", removed)
	}
	if _, err := os.Stat(filepathOf(tn, "stubborn")); err == nil {
		t.Errorf("the pod's folder is still there")
	}
}

func filepathOf(tn *testNode, name string) string {
	return filepath.Join(tn.p.cfg.Dir, "pods", "ns_"+name+"_uid-"+name)
}

// A second deletion with a shorter grace period shortens the wait.
func TestShorterGraceWins(t *testing.T) {
	tn := newTestNode(t, 2)
	tn.create(t, servePod("s", corev1.EnvVar{Name: "IGNORE_TERM", Value: "1"}))
	tn.waitFor(t, "s", "ready", 10*time.Second, podReady)
	t0 := time.Now()
	tn.delete(t, "s", 30)
	time.Sleep(100 * time.Millisecond)
	tn.delete(t, "s", 0)
	tn.waitFor(t, "s", "killed", 5*time.Second, func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("killed after %v; the second deletion asked for 0 s", took)
	}
}

// A failing liveness probe kills the program and the restart policy brings
// it back; the restart count and the last termination say so. (It once
// failed under heavy load: with a 1 s initial delay and a failure
// threshold of 1, a program slow to start was killed before it listened,
// the restart count was already 1 when the test looked, and the run it
// had seen Ready was still alive.)
func TestLivenessFailureRestartsTheContainer(t *testing.T) {
	tn := newTestNode(t, 2)
	pod := servePod("live")
	// The startup probe holds the liveness probe back until the program
	// answers, however slow the machine is to start it (a liveness probe
	// with an initial delay would race the start-up); the liveness
	// probe's timeout is long, so only the 500 fails it.
	pod.Spec.Containers[0].StartupProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(testPort)}},
		PeriodSeconds: 1, FailureThreshold: 120,
	}
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromInt32(testPort)}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 10,
	}
	grace := int64(1)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	tn.create(t, pod)
	first := tn.waitFor(t, "live", "ready", 60*time.Second, podReady)
	restarts := first.Status.ContainerStatuses[0].RestartCount
	if err := os.WriteFile(filepath.Join(tn.p.get("ns/live").dir, "unhealthy"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The file stays in the pod's folder ($HOME), so every run from now on
	// fails its liveness probe with the 500: wait for a restart that says so.
	p := tn.waitFor(t, "live", "restarted for the 500", 60*time.Second, func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		last := cs.LastTerminationState.Terminated
		return cs.RestartCount > restarts && last != nil && strings.Contains(last.Message, "500 Internal Server Error")
	})
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if !strings.Contains(last.Message, "liveness probe failed") {
		rc, _ := tn.p.GetContainerLogs(context.Background(), "ns", "live", "main", api.ContainerLogOpts{Previous: true})
		b, _ := io.ReadAll(rc)
		t.Errorf("last termination %+v, want the liveness failure; its log:\n%s", last, b)
	}
	if alive(containerPid(t, first)) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", containerPid(t, first)))
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", containerPid(t, first)))
		t.Errorf("the first run's process is still alive: %q %s", b, st)
	}
}

// Restart policies: Always restarts a crashing program with back-off,
// Never leaves the pod Failed, OnFailure leaves a clean exit Succeeded.
func TestRestartPolicies(t *testing.T) {
	tn := newTestNode(t, 4)
	exitPod := func(name, code string, policy corev1.RestartPolicy) *corev1.Pod {
		p := servePod(name, corev1.EnvVar{Name: "EXIT_CODE", Value: code})
		p.Spec.Containers[0].Env[0].Value = "exit"
		p.Spec.Containers[0].ReadinessProbe = nil
		p.Spec.RestartPolicy = policy
		return p
	}
	tn.create(t, exitPod("always", "3", corev1.RestartPolicyAlways))
	tn.create(t, exitPod("never", "3", corev1.RestartPolicyNever))
	tn.create(t, exitPod("onfailure", "0", corev1.RestartPolicyOnFailure))
	p := tn.waitFor(t, "always", "restarted twice", 10*time.Second, func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 3 {
		t.Errorf("last termination %+v, want exit code 3", last)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("a crash-looping pod is %s, want Running", p.Status.Phase)
	}
	tn.waitFor(t, "never", "Failed", 10*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	tn.waitFor(t, "onfailure", "Succeeded", 10*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if n := tn.last("never").Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("restartPolicy Never restarted %d times", n)
	}
}

// Logs: both streams, tail, timestamps, the previous run, and a follow
// that ends when the run does.
func TestContainerLogs(t *testing.T) {
	tn := newTestNode(t, 2)
	tn.create(t, servePod("logs", corev1.EnvVar{Name: "TERM_DELAY", Value: "50ms"}))
	tn.waitFor(t, "logs", "ready", 10*time.Second, podReady)
	read := func(o api.ContainerLogOpts) string {
		t.Helper()
		rc, err := tn.p.GetContainerLogs(context.Background(), "ns", "logs", "main", o)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	all := read(api.ContainerLogOpts{})
	if !strings.Contains(all, "started logs\n") || !strings.Contains(all, "to stderr\n") {
		t.Errorf("log %q lacks the program's stdout and stderr", all)
	}
	if got := read(api.ContainerLogOpts{Tail: 1}); strings.Count(got, "\n") != 1 {
		t.Errorf("tail 1 = %q", got)
	}
	ts := read(api.ContainerLogOpts{Timestamps: true})
	first, _, _ := strings.Cut(ts, " ")
	if _, err := time.Parse(time.RFC3339Nano, first); err != nil {
		t.Errorf("timestamped log %q: %v", ts, err)
	}
	if got := read(api.ContainerLogOpts{LimitBytes: 3}); len(got) != 3 {
		t.Errorf("limit 3 bytes gave %q", got)
	}
	if _, err := tn.p.GetContainerLogs(context.Background(), "ns", "logs", "main", api.ContainerLogOpts{Previous: true}); err == nil {
		t.Error("a previous log before any restart")
	}

	// A follower sees the SIGTERM line and ends with the run.
	rc, err := tn.p.GetContainerLogs(context.Background(), "ns", "logs", "main", api.ContainerLogOpts{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(rc); got <- string(b) }()
	tn.delete(t, "logs", 5)
	select {
	case s := <-got:
		if !strings.Contains(s, "got SIGTERM") {
			t.Errorf("followed log %q lacks the SIGTERM line", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the followed log did not end with the run")
	}
}

// A pod the node cannot run fails with the reason instead of being retried.
func TestUnsupportedPodsFail(t *testing.T) {
	tn := newTestNode(t, 2)
	init := servePod("init")
	init.Spec.InitContainers = []corev1.Container{{Name: "setup", Command: []string{"true"}}}
	tn.create(t, init)
	grpc := servePod("grpc")
	grpc.Spec.Containers[0].ReadinessProbe.ProbeHandler = corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: testPort}}
	tn.create(t, grpc)
	for name, want := range map[string]string{"init": "init containers", "grpc": "gRPC"} {
		p := tn.waitFor(t, name, "Failed", 5*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if !strings.Contains(p.Status.Message, want) {
			t.Errorf("pod %s failed with %q, want it to mention %s", name, p.Status.Message, want)
		}
	}
}

// Many pods created and deleted at once from many goroutines: every pod
// gets its own address, every one becomes ready, and when they are gone
// every address is free and no process is left.
func TestConcurrentPodsGetDistinctAddresses(t *testing.T) {
	const n = 12
	tn := newTestNode(t, n)
	var wg sync.WaitGroup
	// Readers (the pod controller's GetPod and GetPods) run throughout.
	stopReading := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stopReading:
					return
				default:
				}
				pods, _ := tn.p.GetPods(context.Background())
				for _, p := range pods {
					_, _ = tn.p.GetPod(context.Background(), p.Namespace, p.Name)
				}
				_ = tn.p.UpdatePod(context.Background(), servePod("c0"))
			}
		})
	}
	defer func() { close(stopReading); readers.Wait() }()
	for i := range n {
		wg.Go(func() { tn.create(t, servePod("c"+strconv.Itoa(i), corev1.EnvVar{Name: "TERM_DELAY", Value: "10ms"})) })
	}
	wg.Wait()
	seen := map[string]string{}
	var pids []int
	for i := range n {
		name := "c" + strconv.Itoa(i)
		p := tn.waitFor(t, name, "ready", 20*time.Second, podReady)
		if other, dup := seen[p.Status.PodIP]; dup {
			t.Fatalf("pods %s and %s share %s", other, name, p.Status.PodIP)
		}
		seen[p.Status.PodIP] = name
		pids = append(pids, containerPid(t, p))
	}
	// The pool is full: one more pod is refused, not given a shared address.
	tn.create(t, servePod("extra"))
	tn.waitFor(t, "extra", "refused", 5*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	for i := range n {
		wg.Go(func() { tn.delete(t, "c"+strconv.Itoa(i), 5) })
	}
	wg.Wait()
	for i := range n {
		tn.gone(t, "c"+strconv.Itoa(i), 5*time.Second)
	}
	tn.delete(t, "extra", 0)
	tn.gone(t, "extra", 5*time.Second)
	if u := tn.p.addrs.used(); u != 0 {
		t.Errorf("%d addresses in use after every pod went", u)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d outlived its pod", pid)
		}
	}
}

// Close stops pods that ignore SIGTERM within the shutdown grace, whatever
// their own grace period.
func TestCloseStopsEveryPodWithinASecond(t *testing.T) {
	tn := newTestNode(t, 4)
	var pids []int
	for _, name := range []string{"x", "y", "z"} {
		tn.create(t, servePod(name, corev1.EnvVar{Name: "IGNORE_TERM", Value: "1"}))
	}
	for _, name := range []string{"x", "y", "z"} {
		pids = append(pids, containerPid(t, tn.waitFor(t, name, "ready", 10*time.Second, podReady)))
	}
	t0 := time.Now()
	tn.p.Close()
	if took := time.Since(t0); took > time.Second {
		t.Errorf("Close took %v", took)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d outlived Close", pid)
		}
	}
	if err := tn.p.CreatePod(context.Background(), servePod("late")); err == nil {
		t.Error("CreatePod after Close succeeded")
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if len(tn.removed) != 0 {
		t.Errorf("the node's shutdown removed pod objects %v; only deletions should", tn.removed)
	}
}

// An exec readiness probe runs in the pod's folder with its environment; a
// tcpSocket liveness probe that passes leaves the program alone.
func TestExecAndTCPProbes(t *testing.T) {
	tn := newTestNode(t, 2)
	pod := servePod("exec")
	c := &pod.Spec.Containers[0]
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", `test -f ready && test "$HOSTNAME" = exec`}}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	// A TCP startup probe holds the liveness probe back until the program
	// listens, however slow its start (an initial delay would race it on a
	// loaded machine); the liveness probe's timeout is long.
	c.StartupProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}},
		PeriodSeconds: 1, FailureThreshold: 120,
	}
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 10,
	}
	tn.create(t, pod)
	p := tn.waitFor(t, "exec", "running", 60*time.Second, func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].State.Running != nil
	})
	time.Sleep(1500 * time.Millisecond)
	if p = tn.last("exec"); podReady(p) {
		t.Fatal("ready before the exec probe could pass")
	}
	if err := os.WriteFile(filepath.Join(filepathOf(tn, "exec"), "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p = tn.waitFor(t, "exec", "ready", 60*time.Second, podReady)
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("a passing liveness probe restarted the program %d times", n)
	}
}
