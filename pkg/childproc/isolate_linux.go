package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// noPIDNamespace is set once creating a PID namespace has been refused
// (not root, or a container that forbids it), so later starts skip trying.
var noPIDNamespace atomic.Bool

// StartIsolated starts cmd like Start, in a PID namespace of its own when
// this process may create one. The child is then its namespace's init: when
// it dies (by the parent-death signal, say) the kernel kills every process
// left in the namespace, grandchildren that left the process group or
// daemonised included, which neither the group nor the parent-death signal
// reaches. Where namespaces are refused it starts cmd without one.
// It reports whether the child got its own namespace.
func StartIsolated(cmd *exec.Cmd) (bool, error) { return startIsolated(cmd, "") }

// StartIsolatedWithPID is StartIsolated that also sets the environment
// variable name to the child's PID as the child itself sees it, which the
// parent cannot know before the fork: systemd's LISTEN_PID (pkg/listenfd).
// In a namespace of its own the child is PID 1; without one, a shell sets
// the variable to its own PID and then execs the command, which keeps it.
func StartIsolatedWithPID(cmd *exec.Cmd, name string) (bool, error) {
	return startIsolated(cmd, name)
}

func startIsolated(cmd *exec.Cmd, pidVar string) (bool, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = Attr()
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	// Kept for a second try without a namespace.
	path, args, env := cmd.Path, cmd.Args, cmd.Env
	if !noPIDNamespace.Load() {
		attr := *cmd.SysProcAttr
		attr.Cloneflags |= syscall.CLONE_NEWPID
		cmd.SysProcAttr = &attr
		if pidVar != "" {
			cmd.Env = append(env[:len(env):len(env)], pidVar+"=1")
		}
		err := Start(cmd)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOSPC) {
			return false, err
		}
		noPIDNamespace.Store(true)
		attr.Cloneflags &^= syscall.CLONE_NEWPID
		// exec.Cmd refuses a second Start: run a copy.
		cmd2 := exec.Command(path)
		cmd2.Args, cmd2.Env, cmd2.Dir = args, env, cmd.Dir
		cmd2.Stdin, cmd2.Stdout, cmd2.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
		cmd2.ExtraFiles, cmd2.WaitDelay = cmd.ExtraFiles, cmd.WaitDelay
		cmd2.SysProcAttr = &attr
		*cmd = *cmd2 //nolint:govet // cmd2 has not started; copying it is how a fresh Cmd replaces a refused one
	}
	if pidVar != "" {
		// $$ is the shell's PID, which exec hands on to the command.
		cmd.Path = "/bin/sh"
		cmd.Args = append([]string{"sh", "-c", `export ` + pidVar + `=$$; exec "$@"`, "sh", path}, args[1:]...)
	}
	return false, Start(cmd)
}

// Catches reports whether process pid has a handler for sig. A namespace's
// init receives only the signals it handles (SIGKILL aside), so a stop that
// sends SIGTERM to an init without a handler must follow with SIGKILL at
// once, which is what SIGTERM's default action would have done.
func Catches(pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// StartTime is when process pid started, in clock ticks since boot
// (/proc/PID/stat's 22nd field): with the PID it names one process, since
// a PID is reused only by a process that starts later.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Alive reports whether pid names a process that has not exited (a zombie
// counts as exited).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}
