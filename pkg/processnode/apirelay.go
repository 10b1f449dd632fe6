package processnode

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// maxRelayed bounds the connections a relay carries at once.
const maxRelayed = 256

// Relay copies the bytes of each connection it accepts to and from its
// target, TLS and all. Pods reach the host's loopback listeners through
// relays on the bridge's address: a pod's 127.0.0.1 is its own.
//
// The node's API relay carries the pods' connections to the API server at
// their host IP (the bridge's address) on the API server's port; a client
// verifies the server's certificate by the name "kubernetes", which the
// API server's certificate holds.
type Relay struct {
	ln     net.Listener
	target string
	name   string // for the log
	log    *slog.Logger
	slots  chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex // guards conns
	conns map[net.Conn]bool
}

// startAPIRelay listens on the bridge address at target's port.
func startAPIRelay(gateway, target string, log *slog.Logger) (*Relay, error) {
	_, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	return StartRelay(net.JoinHostPort(gateway, port), target, "API relay", log)
}

// StartRelay relays connections to addr (host:port, port 0 for a free
// one) to target, at most 256 at once; name prefixes its log lines.
func StartRelay(addr, target, name string, log *slog.Logger) (*Relay, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, target: target, name: name, log: log, slots: make(chan struct{}, maxRelayed), conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is where the relay listens.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		select {
		case r.slots <- struct{}{}:
		default:
			r.log.Warn(r.name+": too many connections, refusing one", "max", maxRelayed)
			c.Close()
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-r.slots }()
			r.relay(c)
		}()
	}
}

func (r *Relay) relay(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		r.log.Warn(r.name+": dialing its target", "target", r.target, "err", err)
		return
	}
	defer up.Close()
	if !r.track(c, up) {
		return
	}
	defer r.untrack(c, up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// track records a relayed pair so close can end it; false once closed.
func (r *Relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		return false
	}
	for _, c := range cs {
		r.conns[c] = true
	}
	return true
}

func (r *Relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

// Close stops listening, ends every relayed connection and waits for
// their goroutines.
func (r *Relay) Close() {
	r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}
