package gatewaybench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// child is a gateway process the benchmark started.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's result, once exited is closed
	log    *os.File
	rmLog  bool
	// stdout is the child's standard output when startChild was asked for
	// it (the Gantry child prints its URL there); nil otherwise.
	stdout io.Reader
	url    string
}

// startChild starts argv with exactly env as its environment; its stderr
// (and stdout, unless wantStdout) goes to the log file at logPath, or to a
// temporary file removed by stop when logPath is empty.
//
// CommandContext kills the child when ctx ends (SIGINT included), and
// Pdeathsig when this process dies first, so no gateway outlives the
// benchmark holding its port.
func startChild(ctx context.Context, argv, env []string, logPath string, wantStdout bool) (*child, error) {
	logf, rmLog, err := openChildLog(logPath)
	if err != nil {
		return nil, fmt.Errorf("its log file: %w", err)
	}
	c := &child{log: logf, rmLog: rmLog, exited: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.cmd.Env = env
	c.cmd.Dir = os.TempDir()
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if wantStdout {
		c.cmd.Stdout = nil
		if c.stdout, err = c.cmd.StdoutPipe(); err != nil {
			c.closeLog()
			return nil, err
		}
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.WaitDelay = time.Second
	started := make(chan error, 1)
	go func() {
		// The kernel sends Pdeathsig when the thread that forked the child
		// exits, not the process, and Go ends threads that a goroutine
		// left locked. This goroutine keeps its thread until the child is
		// gone, so the signal means what it should.
		runtime.LockOSThread()
		if err := c.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		c.closeLog()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	return c, nil
}

func openChildLog(path string) (*os.File, bool, error) {
	if path == "" {
		f, err := os.CreateTemp("", "gantry-bench-gateway-*.log")
		return f, true, err
	}
	f, err := os.Create(path)
	return f, false, err
}

// stop kills the child and waits for it; the benchmark is over, so there
// is nothing to drain.
func (c *child) stop() {
	if c == nil {
		return
	}
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.closeLog()
}

func (c *child) closeLog() {
	_ = c.log.Close()
	if c.rmLog {
		_ = os.Remove(c.log.Name())
	}
}

// logTail is the end of the child's log, on one line, for a skip note.
func (c *child) logTail() string {
	b, err := os.ReadFile(c.log.Name())
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	if len(b) == 0 {
		return "(empty)"
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// startGantryChild runs Gantry's gateway in a process of its own, as
// `gantry serve` runs it, over a Static backend for the instance: o.Gantry
// with the instance's address appended must call ServeGantry. It waits for
// the URL the child prints first. A nil child with a note means the path is
// skipped, and why; an error is only for a cancelled ctx.
func startGantryChild(ctx context.Context, o Options, instanceAddr string, gomaxprocs int) (*child, string, error) {
	if len(o.Gantry) == 0 {
		return nil, "Gantry gateway not measured in a process of its own: no command given (only in-process)", nil
	}
	argv := append(append([]string{}, o.Gantry...), instanceAddr)
	// As for the OpenFaaS gateway, nothing is inherited but GOMAXPROCS,
	// which both gateways get alike.
	c, err := startChild(ctx, argv, runtimeEnv(gomaxprocs, o.GOGC), "", true)
	if err != nil {
		return nil, fmt.Sprintf("Gantry gateway process not measured: %v", err), nil
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(c.stdout)
		if s.Scan() {
			line <- s.Text()
		}
		// Drain anything else, so that the child can never block on a
		// full pipe.
		_, _ = io.Copy(io.Discard, c.stdout)
	}()
	timer := time.NewTimer(o.ReadyWait)
	defer timer.Stop()
	select {
	case u := <-line:
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			c.stop()
			return nil, fmt.Sprintf("Gantry gateway process not measured: it printed %q, want its URL", truncate(u, 80)), nil
		}
		c.url = u
		return c, "", nil
	case <-c.exited:
		note := fmt.Sprintf("Gantry gateway process not measured: it exited before printing its URL (%v); its log ends: %s", c.err, c.logTail())
		c.stop()
		return nil, note, nil
	case <-timer.C:
		note := fmt.Sprintf("Gantry gateway process not measured: no URL within %v; its log ends: %s", o.ReadyWait, c.logTail())
		c.stop()
		return nil, note, nil
	case <-ctx.Done():
		c.stop()
		return nil, "", ctx.Err()
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
