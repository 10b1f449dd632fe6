package processnode

import (
	"os/exec"
	"syscall"

	"gantry.dev/gantry/pkg/childproc"
)

func startCmd(cmd *exec.Cmd) error { return childproc.Start(cmd) }

// signalGroup sends sig to the process group pgid leads.
func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}
