package knativeingress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Server is a running Controller with its two listeners.
type Server struct {
	C             *Controller
	ext, local    *http.Server
	extLn, loLn   net.Listener
	stop          context.CancelFunc
	ran, ext2, l2 chan error
}

// Start starts the controller and listens on extAddr (ExternalIP rules)
// and localAddr (every rule), each speaking HTTP/1.1 and h2c. It returns
// once the listeners are open; Controller.Synced says when the first
// table is in place.
func Start(cfg Config, extAddr, localAddr string) (*Server, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	extLn, err := net.Listen("tcp", extAddr)
	if err != nil {
		return nil, err
	}
	loLn, err := net.Listen("tcp", localAddr)
	if err != nil {
		extLn.Close()
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{C: c, extLn: extLn, loLn: loLn, stop: stop, ran: make(chan error, 1), ext2: make(chan error, 1), l2: make(chan error, 1),
		ext: newHTTPServer(c.External()), local: newHTTPServer(c.Local())}
	go func() { s.ran <- c.Run(ctx) }()
	go func() { s.ext2 <- s.ext.Serve(extLn) }()
	go func() { s.l2 <- s.local.Serve(loLn) }()
	return s, nil
}

func newHTTPServer(h http.Handler) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
}

// ExternalAddr and LocalAddr are the listeners' addresses.
func (s *Server) ExternalAddr() string { return s.extLn.Addr().String() }

// LocalAddr is the cluster-local listener's address.
func (s *Server) LocalAddr() string { return s.loLn.Addr().String() }

// Shutdown stops accepting, lets open requests finish until ctx ends
// (then closes them), and stops the controller.
func (s *Server) Shutdown(ctx context.Context) error {
	errExt := s.ext.Shutdown(ctx)
	errLo := s.local.Shutdown(ctx)
	if errExt != nil {
		errExt = errors.Join(errExt, s.ext.Close())
	}
	if errLo != nil {
		errLo = errors.Join(errLo, s.local.Close())
	}
	s.stop()
	errs := []error{errExt, errLo, <-s.ran}
	for _, ch := range []chan error{s.ext2, s.l2} {
		if err := <-ch; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Hurry closes both listeners and every open connection at once, as a
// second signal asks: a Shutdown under way then returns.
func (s *Server) Hurry() {
	_ = s.ext.Close()
	_ = s.local.Close()
}
