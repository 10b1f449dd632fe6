//go:build !linux

package localcluster

import "syscall"

// componentAttr puts a component in its own process group. Only Linux has a
// parent-death signal, so elsewhere a crashed parent can leave components
// running.
func componentAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
