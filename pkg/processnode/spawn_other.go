//go:build !linux

package processnode

import (
	"errors"
	"os/exec"
	"syscall"
)

func startCmd(*exec.Cmd) error {
	return errors.New("processnode: containers run only on Linux (parent-death signal, 127.0.0.0/8 loopback)")
}

func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}
