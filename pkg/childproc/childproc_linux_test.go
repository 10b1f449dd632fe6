package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A child must outlive the goroutine that started it even when that
// goroutine ends its OS thread: the parent-death signal follows the forking
// thread, so Start forks from a thread that never exits.
func TestChildOutlivesTheThreadThatStartedIt(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("this test needs sleep(1): %v", err)
	}
	cmd := exec.Command(sleep, "30")
	cmd.SysProcAttr = Attr()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		errc <- Start(cmd)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}()
	select {
	case err := <-done:
		t.Fatalf("the child died when its starting thread exited: %v", err)
	case <-time.After(time.Second):
	}
	// Its own process group: the group's id is the child's pid.
	pgid, err := syscall.Getpgid(cmd.Process.Pid)
	if err != nil || pgid != cmd.Process.Pid {
		t.Errorf("pgid = %d, %v; want the child's own group %d", pgid, err, cmd.Process.Pid)
	}
}
