package localcluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startSleeper starts a component named name that sleeps; with ignoreTerm
// it ignores SIGTERM, as a component busy draining would.
func startSleeper(t *testing.T, name string, ignoreTerm bool) *process {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("this test needs sh: %v", err)
	}
	script := "echo ready; exec sleep 600"
	if ignoreTerm {
		script = `trap "" TERM; echo ready; exec sleep 600` // sleep inherits the ignored SIGTERM
	}
	logPath := filepath.Join(t.TempDir(), name+".log")
	p, err := startProcess(name, sh, []string{"-c", script}, nil, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopTogether([]*process{p}, 0) })
	waitReady(t, p, logPath)
	return p
}

// waitReady waits for the sleeper's "ready" line: a SIGTERM sent before
// the shell has run its trap would end a sleeper meant to ignore it (a
// loaded machine showed that).
func waitReady(t *testing.T, p *process, logPath string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound for a slow machine, not a speed target
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "ready") {
			return
		}
		if p.exited() {
			t.Fatalf("%s exited before it was ready: %v", p.name, p.waitErr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s not ready within a minute", p.name)
}

// fakeKillAfter replaces the bound on an orderly exit with a channel the
// test fires, and checks the bound asked for.
func fakeKillAfter(t *testing.T, want time.Duration) chan time.Time {
	t.Helper()
	fire := make(chan time.Time, 1)
	old := killAfter
	killAfter = func(d time.Duration) <-chan time.Time {
		if d != want {
			t.Errorf("bound on an orderly exit = %v, want %v", d, want)
		}
		return fire
	}
	t.Cleanup(func() { killAfter = old })
	return fire
}

// waitExit waits for p's exit, failing after a minute (a bound for a slow
// machine, not a speed target) and returns how it ended.
func waitExit(t *testing.T, p *process) string {
	t.Helper()
	select {
	case <-p.done:
		if p.waitErr == nil {
			return "exit status 0"
		}
		return p.waitErr.Error()
	case <-time.After(time.Minute):
		t.Fatalf("%s still runs a minute after it was stopped", p.name)
		return ""
	}
}

// Stop signals every component at once and kills what ignores SIGTERM
// when the bound is over, not before: a component that drains slowly
// holds up neither the others nor, past the bound, Stop.
func TestStopSignalsEveryComponentAtOnceAndKillsTheRestAtTheBound(t *testing.T) {
	fire := fakeKillAfter(t, stopGrace)
	stubborn := startSleeper(t, "kube-controller-manager", true)
	polite := startSleeper(t, "kwok", false)
	api := startSleeper(t, "kube-apiserver", true)
	etcd := startSleeper(t, "etcd", false)
	// The stubborn one first: stopping in turn would never reach the rest.
	returned := make(chan struct{})
	go func() {
		stopTogether([]*process{stubborn, polite, api, etcd}, stopGrace)
		close(returned)
	}()
	// On a failure below, fire the bound and let stopTogether end before
	// fakeKillAfter's cleanup puts the real timer back.
	t.Cleanup(func() {
		select {
		case fire <- time.Now():
		default:
		}
		<-returned
	})
	for p, want := range map[*process]string{polite: "signal: terminated", api: "signal: killed", etcd: "signal: killed"} {
		if got := waitExit(t, p); got != want {
			t.Errorf("%s ended with %q before the bound, want %q", p.name, got, want)
		}
	}
	select {
	case <-returned:
		t.Fatal("stopTogether returned while a component still ran")
	case <-stubborn.done:
		t.Fatalf("%s ended (%v) before the bound although it ignores SIGTERM", stubborn.name, stubborn.waitErr)
	default:
	}
	fire <- time.Now()
	if got := waitExit(t, stubborn); !strings.Contains(got, "killed") {
		t.Errorf("%s ended with %q at the bound, want killed", stubborn.name, got)
	}
	select {
	case <-returned:
	case <-time.After(time.Minute):
		t.Fatal("stopTogether did not return a minute after every component was gone")
	}
}

// When every component exits on SIGTERM, Stop returns then: the bound
// never fires here.
func TestStopReturnsOnceTheComponentsExitNotAfterTheBound(t *testing.T) {
	fakeKillAfter(t, stopGrace) // never fires
	ps := []*process{startSleeper(t, "kwok", false), startSleeper(t, "kube-scheduler", false), startSleeper(t, "kube-apiserver", false)}
	c := &Cluster{procs: ps, dir: t.TempDir()}
	returned := make(chan error, 1)
	go func() { returned <- c.Stop() }()
	select {
	case err := <-returned:
		if err != nil {
			t.Errorf("Stop: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Stop waited for the bound although every component had exited")
	}
	for _, p := range ps {
		if !p.exited() {
			t.Errorf("%s still runs after Stop", p.name)
		}
	}
}

// cancelOnWrite cancels a context at the first progress line.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (w cancelOnWrite) Write(p []byte) (int, error) { w.cancel(); return len(p), nil }

// `gantry cluster up` interrupted while the cluster starts leaves nothing:
// the detached process and its components stop, and the folder goes.
func TestUpInterruptedWhileStartingLeavesNothing(t *testing.T) {
	requireBinaries(t)
	t.Setenv(serveEnv, "1")
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := Up(ctx, Options{Dir: dir}, []string{os.Args[0], dir}, cancelOnWrite{cancel})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Up = %v, want context.Canceled", err)
	}
	if left := pidsMentioning(t, dir); len(left) > 0 {
		t.Errorf("processes %v still run after an interrupted Up", left)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there after an interrupted Up: %v", dir, err)
	}
}
