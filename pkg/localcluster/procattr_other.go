//go:build !linux

package localcluster

import (
	"os/exec"
	"syscall"
)

// componentAttr puts a component in its own process group. Only Linux has a
// parent-death signal, so elsewhere a crashed parent can leave components
// running.
func componentAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// startCmd starts cmd; without a parent-death signal the forking thread
// does not matter.
func startCmd(cmd *exec.Cmd) error { return cmd.Start() }
