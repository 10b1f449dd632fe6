package childproc

import (
	"os/exec"
	"runtime"
	"strings"
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

// StartIsolatedWithPID sets the variable to the PID the child sees as its
// own, in a PID namespace of its own (where it is 1) and without one (the
// shell that sets it execs the command, which keeps the PID).
func TestStartIsolatedWithPIDNamesTheChildItself(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("this test needs sh: %v", err)
	}
	saved := noPIDNamespace.Load()
	defer noPIDNamespace.Store(saved)
	for _, namespaces := range []bool{true, false} {
		noPIDNamespace.Store(!namespaces)
		var out strings.Builder
		cmd := exec.Command(sh, "-c", `echo "$MY_PID $$ $0 $1"`, "zero", "one")
		cmd.SysProcAttr = Attr()
		cmd.Stdout = &out
		isolated, err := StartIsolatedWithPID(cmd, "MY_PID")
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(out.String())
		if len(f) != 4 || f[0] != f[1] || f[2] != "zero" || f[3] != "one" {
			t.Errorf("namespaces allowed %v (isolated %v): child printed %q, want its own PID twice, then zero one", namespaces, isolated, out.String())
		}
		if isolated && f[0] != "1" {
			t.Errorf("isolated child saw PID %s, want 1", f[0])
		}
	}
}
