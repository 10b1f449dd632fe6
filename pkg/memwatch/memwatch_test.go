package memwatch

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestTreeIsDescendantsAndTheGroup(t *testing.T) {
	children := map[int][]int{10: {11, 12}, 11: {13}, 1: {20}}
	byGroup := map[int][]int{10: {10, 11, 20}} // 20 left the tree, kept the group
	got := treeOf(10, children, byGroup)
	slices.Sort(got)
	if !slices.Equal(got, []int{10, 11, 12, 13, 20}) {
		t.Fatalf("tree %v", got)
	}
}

// start runs a shell script in its own process group, as the local
// runtime does.
func start(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

func TestATreeOverItsLimitIsKilledAndOneUnderItIsNot(t *testing.T) {
	w := New(20 * time.Millisecond)
	defer w.Close()
	// The memory is a grandchild's: the shell's command substitution
	// runs in a subshell that holds the pipe's output.
	hog := start(t, `x=$(head -c 150000000 /dev/zero | tr '\0' a); sleep 60`)
	calm := start(t, `sleep 60`)
	kills := make(chan Kill, 2)
	const limit = 64 << 20
	w.Add("hog", hog.Process.Pid, limit, func(k Kill) { kills <- k })
	w.Add("calm", calm.Process.Pid, limit, func(k Kill) { kills <- k })
	select {
	case k := <-kills:
		if k.ID != "hog" || k.RSS <= limit || k.Limit != limit || k.Processes < 2 {
			t.Fatalf("kill %+v", k)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hog was not killed within 30s")
	}
	if err := hog.Wait(); err == nil {
		t.Fatal("the hog exited cleanly")
	}
	// The calm tree was sampled since and is alive.
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(calm.Process.Pid, 0); err != nil {
		t.Fatalf("the calm tree died: %v", err)
	}
	select {
	case k := <-kills:
		t.Fatalf("a second kill: %+v", k)
	default:
	}
}

// BenchmarkSample is one sampling pass over every process on the machine,
// with one watched tree (the cost the watchdog pays each interval).
func BenchmarkSample(b *testing.B) {
	w := &Watcher{proc: "/proc", watched: map[string]watch{}, members: map[string][]int{}}
	watched := map[string]watch{"self": {pid: 1 << 30, limit: 1 << 62, kill: func(Kill) {}}}
	for b.Loop() {
		w.sample(watched)
	}
}

// BenchmarkSampleKnown is the pass between full scans: the known members
// of one tree of one process.
func BenchmarkSampleKnown(b *testing.B) {
	w := &Watcher{proc: "/proc", watched: map[string]watch{}, members: map[string][]int{}}
	watched := map[string]watch{"self": {pid: os.Getpid(), limit: 1 << 62, kill: func(Kill) {}}}
	w.sample(watched)
	for b.Loop() {
		w.sampleKnown(watched)
	}
}
