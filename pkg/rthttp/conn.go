package rthttp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// fdConn is a TCP connection on a blocking socket. Read and Write are
// plain system calls made by the calling goroutine's thread: the kernel
// wakes that thread when data arrives, where Go's own connections park the
// goroutine in the network poller and leave its wake-up to whichever
// thread polls next and to the scheduler's run queues.
//
// Close may be called while another goroutine is blocked in Read (tls.Conn
// does so when a handshake's context ends): it shuts the socket down, which
// wakes the reader, and the descriptor is released only once no call is
// using it, so a number the kernel hands out again is never touched.
type fdConn struct {
	local, remote net.Addr

	mu      sync.Mutex
	fd      int
	inUse   int  // calls between acquire and release
	closed  bool // Close was called
	rdl     time.Time
	wdl     time.Time
	rtoSet  time.Duration // SO_RCVTIMEO as last set; 0 is none
	wtoSet  time.Duration // SO_SNDTIMEO as last set
	release bool          // descriptor already given back
}

// timeoutError satisfies net.Error so callers treat an expired deadline
// as a timeout, as with Go's own connections.
type timeoutError struct{}

func (timeoutError) Error() string   { return "rthttp: i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Unwrap() error   { return os.ErrDeadlineExceeded }

// dial connects a blocking TCP socket to addr within timeout.
func dial(addr netip.AddrPort, timeout time.Duration) (*fdConn, error) {
	family, sa := syscall.AF_INET, syscall.Sockaddr(nil)
	if addr.Addr().Is4() || addr.Addr().Is4In6() {
		sa = &syscall.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().Unmap().As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	// Linux bounds a blocking connect by the send timeout.
	if timeout > 0 {
		if err := setTimeout(fd, syscall.SO_SNDTIMEO, timeout); err != nil {
			syscall.Close(fd)
			return nil, err
		}
	}
	for {
		err = syscall.Connect(fd, sa)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		if err == syscall.EINPROGRESS || err == syscall.EAGAIN {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(addr), Err: timeoutError{}}
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(addr), Err: os.NewSyscallError("connect", err)}
	}
	// Requests are small and written whole; Nagle would only delay them.
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	c := &fdConn{fd: fd, remote: net.TCPAddrFromAddrPort(addr), wtoSet: timeout}
	if lsa, err := syscall.Getsockname(fd); err == nil {
		c.local = sockaddrToTCP(lsa)
	}
	return c, nil
}

func sockaddrToTCP(sa syscall.Sockaddr) net.Addr {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	}
	return &net.TCPAddr{}
}

func setTimeout(fd, opt int, d time.Duration) error {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	if d > 0 && tv.Sec == 0 && tv.Usec == 0 {
		tv.Usec = 1 // a zero timeval means "no timeout"
	}
	return os.NewSyscallError("setsockopt", syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, opt, &tv))
}

// acquire marks a call in progress and sets the socket's timeout for it
// from the deadline; it fails once the connection is closed or the
// deadline has passed.
func (c *fdConn) acquire(read bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return -1, net.ErrClosed
	}
	dl, set, opt := c.wdl, &c.wtoSet, syscall.SO_SNDTIMEO
	if read {
		dl, set, opt = c.rdl, &c.rtoSet, syscall.SO_RCVTIMEO
	}
	var want time.Duration
	if !dl.IsZero() {
		want = time.Until(dl)
		if want <= 0 {
			return -1, timeoutError{}
		}
	}
	if want != *set {
		if err := setTimeout(c.fd, opt, want); err != nil {
			return -1, err
		}
		*set = want
	}
	c.inUse++
	return c.fd, nil
}

func (c *fdConn) releaseFD() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inUse--
	c.maybeFreeLocked()
}

func (c *fdConn) maybeFreeLocked() {
	if c.closed && c.inUse == 0 && !c.release {
		c.release = true
		syscall.Close(c.fd)
	}
}

func (c *fdConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	fd, err := c.acquire(true)
	if err != nil {
		return 0, c.opErr("read", err)
	}
	defer c.releaseFD()
	for {
		n, err := syscall.Read(fd, b)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, c.opErr("read", timeoutError{})
		case err != nil:
			return 0, c.opErr("read", os.NewSyscallError("read", err))
		case n == 0:
			if c.isClosed() {
				return 0, c.opErr("read", net.ErrClosed)
			}
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *fdConn) Write(b []byte) (int, error) {
	fd, err := c.acquire(false)
	if err != nil {
		return 0, c.opErr("write", err)
	}
	defer c.releaseFD()
	done := 0
	for done < len(b) {
		// MSG_NOSIGNAL: a peer that has gone answers EPIPE, not SIGPIPE.
		n, err := syscall.SendmsgN(fd, b[done:], nil, nil, syscall.MSG_NOSIGNAL)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return done, c.opErr("write", timeoutError{})
		case err != nil:
			return done, c.opErr("write", os.NewSyscallError("sendmsg", err))
		}
		done += n
	}
	return done, nil
}

func (c *fdConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *fdConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

// Close shuts the socket down, waking any blocked call, and frees the
// descriptor when the last call returns.
func (c *fdConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed = true
	if c.inUse > 0 {
		_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	}
	c.maybeFreeLocked()
	return nil
}

// abort shuts the connection down without freeing it: a call blocked on
// it returns, and its owner closes it.
func (c *fdConn) abort() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	}
}

func (c *fdConn) LocalAddr() net.Addr  { return c.local }
func (c *fdConn) RemoteAddr() net.Addr { return c.remote }

func (c *fdConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rdl, c.wdl = t, t
	return nil
}

func (c *fdConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rdl = t
	return nil
}

func (c *fdConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wdl = t
	return nil
}

// errAddress is returned for a URL whose host is not an address the
// transport can dial.
var errAddress = errors.New("rthttp: cannot dial host")

func addressError(host string, err error) error {
	return fmt.Errorf("%w %q: %v", errAddress, host, err)
}
