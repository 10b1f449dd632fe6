//go:build !linux

package childproc

import (
	"errors"
	"os/exec"
	"syscall"
)

// Attr is a process group of its own. Only Linux has a parent-death signal,
// so elsewhere a crashed parent can leave children running.
func Attr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Start starts cmd; without a parent-death signal the forking thread does
// not matter.
func Start(cmd *exec.Cmd) error { return cmd.Start() }

// StartIsolated is Start: PID namespaces are Linux's.
func StartIsolated(cmd *exec.Cmd) (bool, error) { return false, Start(cmd) }

// Catches is true: elsewhere a child gets every signal.
func Catches(int, syscall.Signal) bool { return true }

// StartTime is unknown outside Linux.
func StartTime(int) (uint64, error) { return 0, errors.New("process start times need Linux's /proc") }

// Alive is unknown outside Linux: false, so nothing is signalled on a guess.
func Alive(int) bool { return false }

// StartIsolatedWithPID starts cmd with the environment variable name set
// to the child's PID: a shell sets it to its own PID and execs the command.
func StartIsolatedWithPID(cmd *exec.Cmd, name string) (bool, error) {
	path, args := cmd.Path, cmd.Args
	cmd.Path = "/bin/sh"
	cmd.Args = append([]string{"sh", "-c", `export ` + name + `=$$; exec "$@"`, "sh", path}, args[1:]...)
	return false, Start(cmd)
}
