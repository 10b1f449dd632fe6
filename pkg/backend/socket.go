package backend

// Socket passing, systemd-style (pkg/listenfd): for a function that
// declares socket_activation, the runtime opens the instance's listening
// socket itself and hands it to the process as descriptor 3. Connections
// queue in the socket's backlog from the moment the process exists, so the
// instance is ready to the gateway at once, and a request sent then waits
// for the process's first accept instead of for a poll to find it
// listening. Readiness is still checked, through the same socket: a
// process that never answers on it is stopped within ReadyTimeout, so one
// that declares support and ignores the descriptor cannot hold requests
// forever.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"gantry.dev/gantry/pkg/listenfd"
)

// passedSocket is an instance's listening socket, opened by the runtime.
type passedSocket struct {
	ln   *net.TCPListener
	file *os.File // the descriptor the child inherits
	port int
}

func openSocket() (*passedSocket, error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	file, err := ln.File()
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &passedSocket{ln: ln, file: file, port: ln.Addr().(*net.TCPAddr).Port}, nil
}

// close drops the runtime's own copies once the child holds its own: the
// socket then lives exactly as long as the instance, and a connection
// queued on it is refused, not left waiting, when the instance dies.
func (s *passedSocket) close() {
	if s != nil {
		s.file.Close()
		s.ln.Close()
	}
}

// confirm checks, after the instance was reported ready, that it answers
// on its socket; when it does not within ReadyTimeout, or exits first, it
// is killed and reported gone with the reason.
func (l *Local) confirm(p *proc) error {
	err := l.awaitReady(p)
	if err == nil {
		return nil
	}
	if exit := (*ExitError)(nil); errors.As(err, &exit) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("instance %s declares socket_activation but answered nothing on the socket passed to it (%s, descriptor %d) within %v",
			p.inst.ID, listenfd.EnvFDs, listenfd.FirstFD, l.cfg.ReadyTimeout)
	}
	return fmt.Errorf("instance %s: %w", p.inst.ID, err)
}
