package processnode

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// maxRelayed bounds the API server connections the relay carries at once.
const maxRelayed = 256

// apiRelay carries the pods' connections to the API server, which listens
// on the host's loopback: a pod's 127.0.0.1 is its own, so it reaches the
// API server at its host IP (the bridge's address) on the API server's
// port, and the relay copies the bytes through, TLS and all. A client
// verifies the server's certificate by the name "kubernetes", which the
// API server's certificate holds.
type apiRelay struct {
	ln     net.Listener
	target string
	log    *slog.Logger
	slots  chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex // guards conns
	conns map[net.Conn]bool
}

// startAPIRelay listens on the bridge address at target's port.
func startAPIRelay(gateway, target string, log *slog.Logger) (*apiRelay, error) {
	_, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(gateway, port))
	if err != nil {
		return nil, err
	}
	r := &apiRelay{ln: ln, target: target, log: log, slots: make(chan struct{}, maxRelayed), conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is where pods reach the API server.
func (r *apiRelay) Addr() string { return r.ln.Addr().String() }

func (r *apiRelay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		select {
		case r.slots <- struct{}{}:
		default:
			r.log.Warn("API relay: too many connections, refusing one", "max", maxRelayed)
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

func (r *apiRelay) relay(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		r.log.Warn("API relay: dialing the API server", "err", err)
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
func (r *apiRelay) track(cs ...net.Conn) bool {
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

func (r *apiRelay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

// close stops listening, ends every relayed connection and waits for
// their goroutines.
func (r *apiRelay) close() {
	r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}
