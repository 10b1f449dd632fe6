package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"gantry.dev/gantry/pkg/childproc"
)

// logTailLines is how many log lines an early-exit error quotes.
const logTailLines = 25

// process is one running component. Its stdout and stderr go to logPath.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // the exit status; read it only after done is closed
}

// startProcess starts bin with args, its output appended to logPath. The
// child gets its own process group, so a terminal's Ctrl-C reaches only the
// parent, which then stops the children in order; and a parent-death signal,
// so a crashed parent cannot leave a component behind.
func startProcess(name, bin string, args, env []string, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childproc.Attr()
	if err := childproc.Start(cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes an exit the cluster did not ask for, quoting the end of
// the component's log.
func (p *process) exitError() error {
	status := "exit status 0"
	if p.waitErr != nil {
		status = p.waitErr.Error()
	}
	return fmt.Errorf("%s: %w (%s); last lines of %s:\n%s", p.name, ErrComponentExited, status, p.logPath, tailFile(p.logPath, logTailLines))
}

// signal sends sig to the process's group, unless the process has been
// reaped (its pid may be another's by then).
func (p *process) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = syscall.Kill(-p.pid(), sig)
	}
}

// tailFile returns the last n lines of path, indented.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(string(bytes.TrimRight(data, "\n")), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "    (empty log)"
	}
	return "    " + strings.Join(lines, "\n    ")
}
