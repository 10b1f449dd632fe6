package knativeingress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server is a running Controller with its listeners.
type Server struct {
	C      *Controller
	lns    [3]net.Listener // external, local, https (nil without it)
	srvs   [3]*http.Server
	served [3]chan error
	stop   context.CancelFunc
	ran    chan error
}

// Listeners are the addresses a Server listens at: External serves the
// ExternalIP rules over plain HTTP, Local every rule over plain HTTP,
// HTTPS (optional) the ExternalIP rules over TLS with the certificates of
// the Ingresses' spec.tls.
type Listeners struct {
	External, Local, HTTPS string
}

// Start starts the controller and listens on extAddr (ExternalIP rules)
// and localAddr (every rule), each speaking HTTP/1.1 and h2c, with no
// HTTPS listener. It returns once the listeners are open;
// Controller.Synced says when the first table is in place.
func Start(cfg Config, extAddr, localAddr string) (*Server, error) {
	return StartListeners(cfg, Listeners{External: extAddr, Local: localAddr})
}

// StartListeners is Start with an HTTPS listener when l.HTTPS is set
// (HTTP/2 and HTTP/1.1 over TLS). Redirects name cfg.HTTPSPort, else the
// HTTPS listener's port.
func StartListeners(cfg Config, l Listeners) (*Server, error) {
	s := &Server{ran: make(chan error, 1)}
	var err error
	for i, addr := range []string{l.External, l.Local, l.HTTPS} {
		if addr == "" && i == 2 {
			break
		}
		if s.lns[i], err = net.Listen("tcp", addr); err != nil {
			s.closeListeners()
			return nil, err
		}
	}
	if s.lns[2] != nil && cfg.HTTPSPort == 0 {
		cfg.HTTPSPort = s.lns[2].Addr().(*net.TCPAddr).Port
	}
	if s.C, err = New(cfg); err != nil {
		s.closeListeners()
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { s.ran <- s.C.Run(ctx) }()
	for i, h := range []http.Handler{s.C.External(), s.C.Local(), s.C.HTTPS()} {
		if s.lns[i] == nil {
			continue
		}
		s.srvs[i], s.served[i] = newHTTPServer(h, i == 2), make(chan error, 1)
		// Failed handshakes (a server name without a certificate) and
		// bad requests go to the ingress's log.
		s.srvs[i].ErrorLog = slog.NewLogLogger(s.C.cfg.Logger.Handler(), slog.LevelInfo)
		if i == 2 {
			s.srvs[i].TLSConfig = s.C.TLSConfig()
		}
		go func() {
			if i == 2 {
				s.served[i] <- s.srvs[i].ServeTLS(s.lns[i], "", "")
				return
			}
			s.served[i] <- s.srvs[i].Serve(s.lns[i])
		}()
	}
	return s, nil
}

func (s *Server) closeListeners() {
	for _, ln := range s.lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// newHTTPServer speaks HTTP/1.1 and HTTP/2: over TLS when secure, else
// in clear text (h2c).
func newHTTPServer(h http.Handler, secure bool) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	if secure {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
}

// ExternalAddr is the external plain-HTTP listener's address.
func (s *Server) ExternalAddr() string { return s.lns[0].Addr().String() }

// LocalAddr is the cluster-local listener's address.
func (s *Server) LocalAddr() string { return s.lns[1].Addr().String() }

// HTTPSAddr is the HTTPS listener's address, "" without one.
func (s *Server) HTTPSAddr() string {
	if s.lns[2] == nil {
		return ""
	}
	return s.lns[2].Addr().String()
}

// Shutdown stops accepting, lets open requests finish until ctx ends
// (then closes them), and stops the controller.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	for _, srv := range s.srvs {
		if srv == nil {
			continue
		}
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err, srv.Close())
		}
	}
	s.stop()
	errs = append(errs, <-s.ran)
	for _, ch := range s.served {
		if ch == nil {
			continue
		}
		if err := <-ch; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Hurry closes the listeners and every open connection at once, as a
// second signal asks: a Shutdown under way then returns.
func (s *Server) Hurry() {
	for _, srv := range s.srvs {
		if srv != nil {
			_ = srv.Close()
		}
	}
}
