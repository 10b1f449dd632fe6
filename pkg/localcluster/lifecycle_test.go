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
	"testing"
	"time"

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
