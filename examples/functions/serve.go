package functions

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// DefaultDrain bounds how long Serve waits for in-flight requests after ctx
// is cancelled; it stays under Kubernetes' default 30 s grace period.
const DefaultDrain = 10 * time.Second

// readHeaderTimeout keeps a client that never finishes its headers from
// holding a connection (and a drain) open forever.
const readHeaderTimeout = 10 * time.Second

// Serve serves h on ln until ctx is cancelled, then stops accepting and lets
// in-flight requests finish for at most drain. It returns nil after a clean
// drain and an error when requests were still running at the bound, since
// those were cut off. Request contexts do not derive from ctx, so a shutdown
// does not cancel the work it is waiting for.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, drain time.Duration) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("drain: requests still running after %v were cut off: %w", drain, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
