//go:build !linux

package childproc

import (
	"os/exec"
	"syscall"
)

// Attr is a process group of its own. Only Linux has a parent-death signal,
// so elsewhere a crashed parent can leave children running.
func Attr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Start starts cmd; without a parent-death signal the forking thread does
// not matter.
func Start(cmd *exec.Cmd) error { return cmd.Start() }
