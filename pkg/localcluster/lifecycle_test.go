package localcluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// requireBinaries skips under -short, and fails when the cache is missing.
func requireBinaries(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the control-plane binaries; skipped under -short")
	}
	if err := RequireBinaries(); err != nil {
		t.Fatal(err)
	}
}

func TestStopLeavesNoProcessAndNoFolder(t *testing.T) {
	requireBinaries(t)
	c, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Dir()
	pids := pidsMentioning(t, dir)
	if len(pids) != len(c.procs) {
		t.Errorf("process table shows %d processes using %s, want %d (%v)", len(pids), dir, len(c.procs), c.LogPaths())
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.procs {
		if processAlive(p.pid()) {
			t.Errorf("%s (pid %d) still runs after Stop", p.name, p.pid())
		}
	}
	if left := pidsMentioning(t, dir); len(left) > 0 {
		t.Errorf("processes %v still use %s after Stop", left, dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop (%v)", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStartOnAPortInUseSaysWhichPort(t *testing.T) {
	requireBinaries(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = Start(t.Context(), Options{Port: port})
	if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), fmt.Sprintf("port %d", port)) {
		t.Fatalf("Start on a busy port = %v, want ErrPortInUse naming port %d", err, port)
	}
}

func TestAComponentThatExitsEarlyIsNamedWithItsLogTail(t *testing.T) {
	requireBinaries(t)
	testExtraArgs = map[string][]string{"etcd": {"--no-such-flag"}}
	defer func() { testExtraArgs = nil }()
	dir := t.TempDir()
	start := time.Now()
	_, err := Start(t.Context(), Options{Dir: dir})
	if !errors.Is(err, ErrComponentExited) {
		t.Fatalf("Start with a bad etcd flag = %v, want ErrComponentExited", err)
	}
	for _, want := range []string{"etcd: component exited early", "no-such-flag", filepath.Join(dir, "logs", "etcd.log")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	if left := pidsMentioning(t, dir); len(left) > 0 {
		t.Errorf("processes %v still run after a failed Start", left)
	}
	t.Logf("failed in %v with:\n%v", time.Since(start), err)
}

func TestUpEnvDownRunADetachedCluster(t *testing.T) {
	requireBinaries(t)
	t.Setenv(serveEnv, "1")
	dir := filepath.Join(t.TempDir(), "cluster")
	argv := []string{os.Args[0], dir}
	var progress strings.Builder
	kubeconfig, err := Up(t.Context(), Options{Dir: dir}, argv, &progress)
	if err != nil {
		t.Fatal(err)
	}
	defer Down(dir)
	if _, err := Up(t.Context(), Options{Dir: dir}, argv, &progress); err == nil || !strings.Contains(err.Error(), "already runs") {
		t.Errorf("second Up = %v, want an already-running error", err)
	}
	if got, err := Env(dir); err != nil || got != kubeconfig {
		t.Errorf("Env = %q, %v; want %q", got, err, kubeconfig)
	}
	if !strings.Contains(progress.String(), "ready in") {
		t.Errorf("progress lacks the ready line:\n%s", progress.String())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Get(t.Context(), NodeName(0), metav1.GetOptions{}); err != nil {
		t.Errorf("the detached cluster does not answer: %v", err)
	}
	pids := pidsMentioning(t, dir)
	if len(pids) != 4 { // serve, etcd, kube-apiserver, kwok
		t.Errorf("%d processes use %s, want 4", len(pids), dir)
	}
	if err := Down(dir); err != nil {
		t.Fatal(err)
	}
	if left := pidsMentioning(t, dir); len(left) > 0 {
		t.Errorf("processes %v still run after Down", left)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Down (%v)", dir, err)
	}
	if _, err := Env(dir); err == nil {
		t.Error("Env succeeds after Down")
	}
}

// pidsMentioning scans the process table for live processes whose command
// line contains s.
func pidsMentioning(t testing.TB, s string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) && processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestUpQuotesTheLogOfAServeProcessThatDies(t *testing.T) {
	requireBinaries(t)
	dir := filepath.Join(t.TempDir(), "cluster")
	argv := []string{"/bin/sh", "-c", "echo serve failed: boom >&2; exit 3", dir}
	_, err := Up(t.Context(), Options{Dir: dir}, argv, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "serve failed: boom") || !strings.Contains(err.Error(), "cluster.log") {
		t.Fatalf("Up = %v, want an error quoting cluster.log", err)
	}
}

// A cluster killed outright (no chance to stop its process nodes) leaves
// its pods' network namespaces, veth pairs and bridge behind; Down removes
// them.
func TestDownAfterAKillLeavesNoPodNetwork(t *testing.T) {
	requireBinaries(t)
	if os.Geteuid() != 0 {
		t.Skip("pod network namespaces need root")
	}
	t.Setenv(serveEnv, "1")
	t.Setenv(serveProcessNodeEnv, "1")
	dir := filepath.Join(t.TempDir(), "cluster")
	kubeconfig, err := Up(t.Context(), Options{Dir: dir, Nodes: 0, ProcessNodes: 1, Scheduler: true, ControllerManager: true},
		[]string{os.Args[0], dir}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer Down(dir)
	record, err := os.ReadFile(filepath.Join(dir, ProcessNodeName(0), "network"))
	if err != nil {
		t.Fatalf("the process node recorded no pod network: %v", err)
	}
	index := strings.TrimSpace(string(record))
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: ProcessNodeName(0), Containers: []corev1.Container{{
			Name: "c", Image: "example.invalid/sleep:1", Command: []string{"sleep", "1000"}}}}}
	if _, err := kc.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ours := func() []string {
		var left []string
		if entries, err := os.ReadDir("/run/netns"); err == nil {
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "gantry-"+index+"-") {
					left = append(left, e.Name())
				}
			}
		}
		ifs, err := net.Interfaces()
		if err != nil {
			t.Fatal(err)
		}
		for _, ifc := range ifs {
			if ifc.Name == "gantry"+index || strings.HasPrefix(ifc.Name, "gpod"+index+"-") {
				left = append(left, ifc.Name)
			}
		}
		return left
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(ours()) < 3 { // the bridge, the pod's namespace and its veth
		if time.Now().After(deadline) {
			t.Fatalf("the pod's network did not appear within 60 s: %v", ours())
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid, ok := runningPid(dir)
	if !ok {
		t.Fatal("the cluster does not run")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := Down(dir); err != nil {
		t.Fatal(err)
	}
	if left := ours(); len(left) > 0 {
		t.Errorf("left behind after Down: %v", left)
	}
}
