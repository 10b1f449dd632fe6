package localcluster

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// A component must not die when the goroutine that started it ends its OS
// thread, as the rtqueue workers do: the kernel's parent-death signal
// follows the forking thread, not the process.
func TestComponentsOutliveTheThreadThatStartedThem(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("this test needs sleep(1): %v", err)
	}
	logPath := filepath.Join(t.TempDir(), "sleeper.log")
	type started struct {
		p   *process
		err error
	}
	out := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		p, err := startProcess("sleeper", sleep, []string{"30"}, nil, logPath)
		out <- started{p, err}
	}()
	s := <-out
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer stopTogether([]*process{s.p}, time.Second)
	select {
	case <-s.p.done:
		t.Fatalf("the component died when its starting thread exited: %v", s.p.waitErr)
	case <-time.After(time.Second):
	}
}
