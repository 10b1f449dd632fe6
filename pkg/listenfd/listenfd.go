// Package listenfd is systemd's socket-passing protocol (sd_listen_fds(3)),
// both sides of it. A runtime opens an instance's listening socket itself
// and hands it over as file descriptor 3, with LISTEN_FDS=1 and LISTEN_PID
// set to the process's own PID, so that connections queue in the socket's
// backlog from the moment the process exists: a request waits for the
// process to call accept instead of for the runtime to see it listening.
//
// The package links nothing but the standard library, so that the slim
// example-functions runtime (examples/functions/cmd/gantry-fn) can use it.
package listenfd

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// The protocol's environment variables and first descriptor.
const (
	EnvFDs   = "LISTEN_FDS"
	EnvPID   = "LISTEN_PID"
	EnvNames = "LISTEN_FDNAMES"
	FirstFD  = 3
)

// Inherited returns the listening socket this process was passed, or ok
// false when it was passed none: LISTEN_FDS unset, or LISTEN_PID naming
// another process (the variables were inherited from a parent that was the
// one meant). Like sd_listen_fds(1) it removes the variables, so that a
// child of this process does not take the socket for its own, and marks the
// descriptor close-on-exec. More than one socket is an error: an instance
// serves one port.
func Inherited() (ln net.Listener, ok bool, err error) {
	return inherited(os.Getenv, os.Getpid(), FirstFD)
}

// inherited is Inherited with the environment, this process's PID and the
// first descriptor given, for tests.
func inherited(getenv func(string) string, pid, first int) (net.Listener, bool, error) {
	fds, wantPID := getenv(EnvFDs), getenv(EnvPID)
	if fds == "" {
		return nil, false, nil
	}
	defer func() {
		for _, v := range []string{EnvFDs, EnvPID, EnvNames} {
			_ = os.Unsetenv(v)
		}
	}()
	if p, err := strconv.Atoi(wantPID); err != nil || p != pid {
		// Meant for another process (or malformed, which
		// sd_listen_fds also treats as not ours).
		return nil, false, nil
	}
	n, err := strconv.Atoi(fds)
	switch {
	case err != nil || n < 0:
		return nil, false, fmt.Errorf("%s=%q: want a count of descriptors", EnvFDs, fds)
	case n == 0:
		return nil, false, nil
	case n > 1:
		return nil, false, fmt.Errorf("%s=%d: this program serves one socket", EnvFDs, n)
	}
	syscall.CloseOnExec(first)
	f := os.NewFile(uintptr(first), "listen-fd-"+strconv.Itoa(first))
	defer f.Close() // FileListener keeps a copy of its own
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, false, fmt.Errorf("descriptor %d from %s: %w", first, EnvFDs, err)
	}
	return ln, true, nil
}

// Env is what a runtime adds to the environment of a process it passes one
// socket to, besides EnvPID, which must be the PID the process will have
// and so is set where that is known (pkg/childproc).
func Env() []string { return []string{EnvFDs + "=1", EnvNames + "=http"} }
