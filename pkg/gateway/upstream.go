package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// upstream is the gateway's HTTP/1.1 client to function instances. The
// calling goroutine writes the request and reads the response on a pooled
// connection itself: net/http's Transport hands every request to a writer
// and a reader goroutine per connection and back, three goroutine switches
// per request that cost CPU and, on a busy machine, a run-queue wait each
// (measured in docs/benchmarks.md, "Gateway overhead"). Instances are on
// loopback or pod IPs, plain HTTP/1.1 without proxies, redirects, cookies
// or compression, so little of the Transport is needed.
//
// A connection is reused only after a complete exchange; before reuse a
// non-blocking peek checks that the instance has not closed it. A timeout
// or a cancelled request closes its connection.
type upstream struct {
	dialer net.Dialer
	// maxIdlePerHost and maxIdle bound the idle connections kept.
	maxIdlePerHost, maxIdle int
	idleTimeout             time.Duration

	mu    sync.Mutex
	idle  map[string][]*upConn // by address, most recently used last
	nIdle int
	quit  chan struct{}
	once  sync.Once
}

// upConn is one connection to an instance. Its buffers come from pools
// for the length of one exchange, so an idle connection holds none.
type upConn struct {
	net.Conn
	br *bufio.Reader
	bw *bufio.Writer
	// read and written count the bytes read from and written to the
	// connection during the current exchange.
	read, written int64
	idleFrom      time.Time
	// late, while set, is called once when the exchange reaches its soft
	// deadline; the exchange then goes on until hard. aborted is set
	// before an abort moves the deadline to the past, so that the move
	// is never mistaken for the soft deadline, nor undone by the move to
	// hard.
	late    func()
	hard    time.Time
	aborted atomic.Bool
}

func (c *upConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		c.read += int64(n)
		if err != nil && c.pastSoft(err) {
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (c *upConn) Write(p []byte) (int, error) {
	total := 0
	for {
		n, err := c.Conn.Write(p[total:])
		total += n
		c.written += int64(n)
		if err != nil && c.pastSoft(err) && total < len(p) {
			continue
		}
		if total == len(p) {
			err = nil
		}
		return total, err
	}
}

// pastSoft reports whether an I/O error is the soft deadline passing, in
// which case the exchange goes on: late is called (once) and the deadline
// moves to hard.
func (c *upConn) pastSoft(err error) bool {
	if c.late == nil || c.aborted.Load() || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	late := c.late
	c.late = nil
	if c.SetDeadline(c.hard) != nil {
		return false
	}
	if c.aborted.Load() {
		_ = c.SetDeadline(time.Unix(1, 0)) // the abort came in between
		return false
	}
	late()
	return true
}

func newUpstream() *upstream {
	u := &upstream{dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		maxIdlePerHost: 1024, maxIdle: 4096, idleTimeout: 90 * time.Second,
		idle: map[string][]*upConn{}, quit: make(chan struct{})}
	go u.janitor()
	return u
}

// errDial marks a request that never reached the instance: nothing was
// sent, so it can go to another instance as it is.
type errDial struct{ err error }

func (e *errDial) Error() string { return "connecting: " + e.err.Error() }
func (e *errDial) Unwrap() error { return e.err }

// errNotSent marks a request whose connection failed before any byte of
// it was written (reset, closed): the instance cannot have received it.
type errNotSent struct{ err error }

func (e *errNotSent) Error() string { return "before sending: " + e.err.Error() }
func (e *errNotSent) Unwrap() error { return e.err }

// neverDelivered reports an error after which the instance cannot have
// seen the request, so that sending it to another is safe whatever the
// function does.
func neverDelivered(err error) bool {
	var dial *errDial
	var notSent *errNotSent
	return errors.As(err, &dial) || errors.As(err, &notSent)
}

// upRequest is what the gateway sends an instance.
type upRequest struct {
	addr, method, path, query string
	header                    http.Header
	body                      []byte
}

// upResponse is an instance's complete answer.
type upResponse struct {
	status int
	header http.Header
	body   []byte
}

// do sends r and reads the whole answer, its body bounded by maxBody
// (errTooLarge past it), by the deadline and by ctx.
func (u *upstream) do(ctx context.Context, r *upRequest, deadline time.Time, maxBody int64) (*upResponse, error) {
	return u.doLate(ctx, r, deadline, deadline, maxBody, nil)
}

// doLate is do with two deadlines: when the exchange has not ended at
// soft, late is called once, from the calling goroutine, and the exchange
// goes on until hard, so that an instance still working past its
// function's timeout keeps its slot until its answer ends. abort ends the
// exchange at once.
func (u *upstream) doLate(abort context.Context, r *upRequest, soft, hard time.Time, maxBody int64, late func()) (*upResponse, error) {
	ctx := abort
	c, err := u.get(ctx, r.addr, soft)
	if err != nil {
		return nil, err
	}
	if err := c.SetDeadline(soft); err != nil {
		c.Close()
		return nil, err
	}
	c.late, c.hard = late, hard
	c.aborted.Store(false)
	// An aborted request ends at once: the connection's deadline moves to
	// the past, so whatever read or write is pending returns.
	stop := context.AfterFunc(ctx, func() {
		c.aborted.Store(true)
		_ = c.SetDeadline(time.Unix(1, 0))
	})
	resp, reuse, err := u.exchange(c, r, maxBody)
	c.late = nil // before the connection goes back to the pool
	if !stop() || ctx.Err() != nil {
		reuse = false
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if reuse {
		u.put(r.addr, c)
	} else {
		c.Close()
	}
	return resp, err
}

var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
)

// exchange writes the request and reads the response on c; reuse says the
// connection is left clean for another request.
func (u *upstream) exchange(c *upConn, r *upRequest, maxBody int64) (*upResponse, bool, error) {
	c.read, c.written = 0, 0
	c.bw = writerPool.Get().(*bufio.Writer)
	c.bw.Reset(c)
	err := writeRequest(c.bw, r)
	c.bw.Reset(nil)
	writerPool.Put(c.bw)
	c.bw = nil
	if err != nil {
		if c.written == 0 {
			err = &errNotSent{err}
		}
		return nil, false, err
	}
	c.br = readerPool.Get().(*bufio.Reader)
	c.br.Reset(c)
	resp, reuse, err := u.readAnswer(c, r, maxBody)
	// Everything read was read in this goroutine and the body is closed,
	// so nothing holds the reader now. Bytes left in it would be a second
	// answer nobody asked for: the connection is not clean.
	reuse = reuse && c.br.Buffered() == 0
	c.br.Reset(nil)
	readerPool.Put(c.br)
	c.br = nil
	return resp, reuse, err
}

// readAnswer reads the final response to r on c.
func (u *upstream) readAnswer(c *upConn, r *upRequest, maxBody int64) (*upResponse, bool, error) {
	var req *http.Request // ReadResponse needs the method only to know a HEAD answer has no body
	if r.method == http.MethodHead {
		req = headRequest
	}
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, false, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // an interim answer (103 Early Hints): the final one follows
		}
		var body []byte
		if resp.Body != http.NoBody { // HEAD, 204 and 304 answers have none, whatever their length says
			if body, err = readBounded(resp.Body, resp.ContentLength, maxBody); err != nil {
				return nil, false, err
			}
		}
		reuse := !resp.Close && resp.ProtoAtLeast(1, 1)
		return &upResponse{status: resp.StatusCode, header: resp.Header, body: body}, reuse, nil
	}
}

var headRequest = &http.Request{Method: http.MethodHead}

// readBounded reads a body of declared length n (-1 when unknown) whole,
// refusing more than limit bytes before allocating for them.
func readBounded(body io.ReadCloser, n, limit int64) ([]byte, error) {
	defer body.Close()
	if n > limit {
		return nil, fmt.Errorf("%w of %d bytes (declared %d)", errTooLarge, limit, n)
	}
	if n >= 0 && n <= exactRead {
		buf := make([]byte, n)
		if _, err := io.ReadFull(body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	// Unknown or large: grow as the bytes come, never to more than limit.
	buf, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("%w of %d bytes", errTooLarge, limit)
	}
	return buf, nil
}

// writeRequest writes r as HTTP/1.1 and flushes it. Header fields that
// could break the framing (CR, LF, NUL; a colon or space in a name) are
// never written; the gateway's own parser never lets them in, but chains
// pass an instance's answer on.
func writeRequest(w *bufio.Writer, r *upRequest) error {
	target := (&url.URL{Path: r.path, RawQuery: r.query}).RequestURI()
	if !validToken(r.method) || !validTarget(target) {
		return fmt.Errorf("request line %q %q is not valid", r.method, target)
	}
	w.WriteString(r.method)
	w.WriteByte(' ')
	w.WriteString(target)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(r.addr)
	w.WriteString("\r\n")
	for k, vs := range r.header {
		// Expect is answered by the gateway's own server; the instance
		// gets the whole body at once.
		if hopHeaders[k] || k == "Host" || k == "Expect" || !validToken(k) {
			continue
		}
		for _, v := range vs {
			if !validValue(v) {
				continue
			}
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	if len(r.body) > 0 || (r.method != http.MethodGet && r.method != http.MethodHead) {
		var num [20]byte
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(num[:0], int64(len(r.body)), 10))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(r.body)
	return w.Flush()
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b <= ' ' || b >= 0x7f || b == ':' || b == '(' || b == ')' || b == '<' || b == '>' || b == '@' ||
			b == ',' || b == ';' || b == '\\' || b == '"' || b == '/' || b == '[' || b == ']' || b == '?' ||
			b == '=' || b == '{' || b == '}' {
			return false
		}
	}
	return true
}

func validTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	return s != ""
}

func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b == '\r' || b == '\n' || b == 0 {
			return false
		}
	}
	return true
}

// get returns an idle connection to addr that the instance has not closed,
// or dials one. A dial error is wrapped in errDial.
func (u *upstream) get(ctx context.Context, addr string, deadline time.Time) (*upConn, error) {
	for {
		c := u.takeIdle(addr)
		if c == nil {
			break
		}
		if alive(c.Conn) {
			return c, nil
		}
		c.Close()
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	nc, err := u.dialer.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, &errDial{err}
	}
	return &upConn{Conn: nc}, nil
}

func (u *upstream) takeIdle(addr string) *upConn {
	u.mu.Lock()
	defer u.mu.Unlock()
	cs := u.idle[addr]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	if len(cs) == 1 {
		delete(u.idle, addr)
	} else {
		u.idle[addr] = cs[:len(cs)-1]
	}
	u.nIdle--
	return c
}

func (u *upstream) put(addr string, c *upConn) {
	_ = c.SetDeadline(time.Time{})
	c.idleFrom = time.Now()
	u.mu.Lock()
	if u.nIdle >= u.maxIdle || len(u.idle[addr]) >= u.maxIdlePerHost {
		u.mu.Unlock()
		c.Close()
		return
	}
	select {
	case <-u.quit:
		u.mu.Unlock()
		c.Close()
		return
	default:
	}
	u.idle[addr] = append(u.idle[addr], c)
	u.nIdle++
	u.mu.Unlock()
}

// alive reports whether an idle connection is still open: a peek that
// must not block finds nothing to read. EOF (the instance closed it), a
// reset, or bytes nobody asked for all make it unusable.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = n < 0 && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK))
		return true
	})
	return err == nil && ok
}

// janitor closes connections idle past idleTimeout, and those whose
// instance has gone, every few seconds: instances come and go, and their
// idle connections must not pile up.
func (u *upstream) janitor() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-u.quit:
			return
		case <-t.C:
			u.sweep(time.Now())
		}
	}
}

// sweep checks the idle connections outside the lock, so requests never
// wait behind the peeks, then drops those found stale that are still idle.
func (u *upstream) sweep(now time.Time) {
	u.mu.Lock()
	var idle []*upConn
	for _, cs := range u.idle {
		idle = append(idle, cs...)
	}
	u.mu.Unlock()
	stale := map[*upConn]bool{}
	for _, c := range idle {
		// A connection a request took meanwhile may show its answer's
		// bytes to the peek; it is not in the pool any more, so the
		// removal below leaves it alone.
		if now.Sub(c.idleFrom) > u.idleTimeout || !alive(c.Conn) {
			stale[c] = true
		}
	}
	if len(stale) == 0 {
		return
	}
	var drop []*upConn
	u.mu.Lock()
	for addr, cs := range u.idle {
		keep := cs[:0]
		for _, c := range cs {
			if stale[c] {
				drop = append(drop, c)
				continue
			}
			keep = append(keep, c)
		}
		clear(cs[len(keep):])
		u.nIdle -= len(cs) - len(keep)
		if len(keep) == 0 {
			delete(u.idle, addr)
		} else {
			u.idle[addr] = keep
		}
	}
	u.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}

// close stops the janitor and closes every idle connection.
func (u *upstream) close() {
	u.once.Do(func() { close(u.quit) })
	u.mu.Lock()
	idle := u.idle
	u.idle, u.nIdle = map[string][]*upConn{}, 0
	u.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.Close()
		}
	}
}
