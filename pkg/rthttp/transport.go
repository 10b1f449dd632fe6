// Package rthttp is an HTTP/1.1 client transport whose round trips run
// entirely on the calling goroutine's OS thread.
//
// Go's own transport hands a request to connection goroutines: for HTTP/2
// a writer and one read loop per connection, shared by every request on
// it. A request made from a real-time, thread-locked worker therefore
// waits for ordinary goroutines to be scheduled twice (to write, and to
// deliver the response), behind whatever else the process runs, and its
// frames queue behind other requests' on the one connection. Transport
// instead dials blocking sockets and does the TLS handshake, the write and
// the read of headers and body with plain system calls on the caller's
// thread, one request per connection at a time. A worker running
// SCHED_FIFO is then woken by the kernel the moment its response arrives
// and does all of the call's CPU work at its own priority.
//
// It is meant for a controller's few critical writes, not for bulk
// traffic: no HTTP/2, no proxies, no compression, no streaming watches.
package rthttp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Defaults.
const (
	DefaultMaxIdle     = 4
	DefaultDialTimeout = 10 * time.Second
	DefaultIdleTimeout = 30 * time.Second
	// readBuffer holds the status line and headers; larger bodies stream
	// through it.
	readBuffer = 16 << 10
)

// ErrClosed is returned by RoundTrip after Close.
var ErrClosed = errors.New("rthttp: transport closed")

// Transport is an http.RoundTripper for http and https URLs whose host is
// an IP address or a name the resolver maps to one. The zero value is not
// usable; use New.
type Transport struct {
	tls         *tls.Config
	maxIdle     int
	dialTimeout time.Duration
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   map[string][]*conn // by scheme://host:port
	closed bool
}

// Options configures a Transport.
type Options struct {
	// TLS is used for https URLs; its NextProtos is replaced by http/1.1.
	// Nil means the system roots and no client certificate.
	TLS *tls.Config
	// MaxIdle bounds the idle connections kept per host (default 4): one
	// per critical worker that may be writing at once is enough.
	MaxIdle int
	// DialTimeout bounds a connect and a TLS handshake (default 10 s).
	DialTimeout time.Duration
	// IdleTimeout retires a connection idle this long (default 30 s)
	// before a server does: a critical request then starts with a
	// handshake rather than with a connection the server is closing.
	IdleTimeout time.Duration
}

// New returns a transport.
func New(o Options) *Transport {
	t := &Transport{maxIdle: o.MaxIdle, dialTimeout: o.DialTimeout, idleTimeout: o.IdleTimeout, idle: map[string][]*conn{}}
	if t.maxIdle <= 0 {
		t.maxIdle = DefaultMaxIdle
	}
	if t.dialTimeout <= 0 {
		t.dialTimeout = DefaultDialTimeout
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = DefaultIdleTimeout
	}
	if o.TLS != nil {
		t.tls = o.TLS.Clone()
	} else {
		t.tls = &tls.Config{}
	}
	t.tls.NextProtos = []string{"http/1.1"}
	return t
}

// conn is one kept-alive connection.
type conn struct {
	raw  *fdConn
	rw   net.Conn // raw, or a tls.Conn over it
	br   *bufio.Reader
	read int64     // bytes read from rw, to tell "no answer at all" from a broken one
	idle time.Time // when it was last put back
}

// Read feeds br, counting.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.rw.Read(p)
	c.read += int64(n)
	return n, err
}

func (c *conn) close() { _ = c.rw.Close() }

// RoundTrip sends req on an idle or new connection of its own and reads
// the response headers, all on the calling thread; reading the body is the
// caller's, on its own thread too. The body must be read to its end (or
// closed) to give the connection back.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkRequest(req); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	key := req.URL.Scheme + "://" + net.JoinHostPort(req.URL.Hostname(), hostPort(req.URL))
	c, reused, err := t.get(ctx, key, req.URL)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, unanswered, err := t.exchange(ctx, c, req)
	if err != nil && reused && unanswered && ctx.Err() == nil && rewindable(req) {
		// The server closed the kept-alive connection before our request
		// reached it (the write failed, or the connection ended without a
		// byte of answer): it did not act on it, so it goes again, once,
		// on a new connection. A connection that breaks after answering
		// anything is not retried: the request may have been carried out.
		c2, derr := t.dial(ctx, req.URL)
		if derr != nil {
			return nil, fmt.Errorf("%w (and a new connection failed: %v)", err, derr)
		}
		if req.GetBody != nil {
			b, gerr := req.GetBody()
			if gerr != nil {
				c2.close()
				return nil, err
			}
			r2 := req.Clone(ctx)
			r2.Body = b
			req = r2
		}
		c = c2
		resp, _, err = t.exchange(ctx, c, req)
	}
	if err != nil {
		return nil, err
	}
	reusable := !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		if reusable {
			t.put(key, c)
		} else {
			c.close()
		}
		return resp, nil
	}
	resp.Body = &body{rc: resp.Body, t: t, c: c, key: key, reusable: reusable, stop: watch(ctx, c)}
	return resp, nil
}

func checkRequest(req *http.Request) error {
	switch {
	case req.URL == nil:
		return errors.New("rthttp: nil request URL")
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return fmt.Errorf("rthttp: unsupported scheme %q", req.URL.Scheme)
	case req.URL.Host == "":
		return errors.New("rthttp: no host in request URL")
	}
	return nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// rewindable says whether req's body can be sent again.
func rewindable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// exchange writes req and reads the response headers. unanswered reports
// a failure before the server sent a byte: the write failed, or the
// connection ended without an answer. Cancelling ctx shuts the connection
// down, which wakes the blocked call.
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request) (resp *http.Response, unanswered bool, err error) {
	stop := watch(ctx, c)
	if err := req.Write(c.rw); err != nil {
		stop()
		c.close()
		return nil, true, ctxErr(ctx, err)
	}
	before := c.read
	resp, err = http.ReadResponse(c.br, req)
	if !stop() {
		// Cancelled: the connection was shut down under the call.
		c.close()
		if err == nil {
			_ = resp.Body.Close()
		}
		return nil, false, ctxErr(ctx, errors.New("rthttp: request cancelled"))
	}
	if err != nil {
		c.close()
		closed := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
		return nil, closed && c.read == before, ctxErr(ctx, err)
	}
	return resp, false, nil
}

// watch shuts c down if ctx ends before the returned stop is called.
func watch(ctx context.Context, c *conn) func() bool {
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, c.raw.abort)
}

func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// get returns an idle connection for key or a new one, and whether it
// was reused.
func (t *Transport) get(ctx context.Context, key string, u *url.URL) (*conn, bool, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, false, ErrClosed
	}
	var stale []*conn
	for l := t.idle[key]; len(l) > 0; l = t.idle[key] {
		c := l[len(l)-1]
		t.idle[key] = l[:len(l)-1]
		if time.Since(c.idle) > t.idleTimeout {
			stale = append(stale, c)
			continue
		}
		t.mu.Unlock()
		closeAll(stale)
		return c, true, nil
	}
	t.mu.Unlock()
	closeAll(stale)
	c, err := t.dial(ctx, u)
	return c, false, err
}

// dial connects to u's host, trying each of its addresses, and does the
// TLS handshake for https, all on the calling thread. Only a host name
// goes through the resolver (and its goroutines); an IP address, as in a
// kubeconfig or in-cluster config, does not.
func (t *Transport) dial(ctx context.Context, u *url.URL) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.dialTimeout)
	defer cancel()
	port, err := strconv.ParseUint(hostPort(u), 10, 16)
	if err != nil {
		return nil, addressError(u.Host, err)
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, perr := netip.ParseAddr(host); perr == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, addressError(host, err)
	}
	var errs []error
	for _, a := range addrs {
		dl, _ := ctx.Deadline()
		raw, err := dial(netip.AddrPortFrom(a, uint16(port)), time.Until(dl))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c := &conn{raw: raw, rw: raw}
		if u.Scheme == "https" {
			cfg := t.tls
			if cfg.ServerName == "" {
				cfg = cfg.Clone()
				cfg.ServerName = host
			}
			tc := tls.Client(raw, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = tc.Close()
				return nil, ctxErr(ctx, fmt.Errorf("rthttp: TLS handshake with %s: %w", u.Host, err))
			}
			c.rw = tc
		}
		c.br = bufio.NewReaderSize(c, readBuffer)
		return c, nil
	}
	return nil, errors.Join(errs...)
}

func hostPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// put keeps c for the next request to key, or closes it.
func (t *Transport) put(key string, c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.idle[key]) >= t.maxIdle {
		c.close()
		return
	}
	c.idle = time.Now()
	t.idle[key] = append(t.idle[key], c)
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		c.close()
	}
}

// CloseIdleConnections closes every idle connection.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*conn{}
	t.mu.Unlock()
	for _, l := range idle {
		closeAll(l)
	}
}

// Close closes the idle connections and makes later round trips fail;
// connections in use close when their body is done.
func (t *Transport) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.CloseIdleConnections()
}

// body gives the connection back when the response has been read to its
// end, and closes it if the caller stops early.
type body struct {
	rc       io.ReadCloser
	t        *Transport
	c        *conn
	key      string
	reusable bool
	stop     func() bool

	once sync.Once
	eof  bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
		b.finish()
	}
	return n, err
}

func (b *body) Close() error {
	b.finish()
	return nil
}

func (b *body) finish() {
	b.once.Do(func() {
		if b.stop() && b.eof && b.reusable {
			_ = b.rc.Close()
			b.t.put(b.key, b.c)
			return
		}
		// Closed early: the rest of the body is not worth reading (the
		// response body's own Close would drain it), so the connection
		// goes, then the body fails fast.
		b.c.close()
		_ = b.rc.Close()
	})
}
