package rtcontroller

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/rthttp"
)

// criticalRouter sends the requests of critical reconciles (criticality at
// or above the floor) over rthttp, on the worker's own real-time thread and
// connections of their own, and every other request over client-go's
// shared HTTP/2 connection. Without it a critical status write or pod
// create is handed to the connection's writer and read-loop goroutines,
// which run on ordinary threads and wait in Go's run queues behind
// everything else the process does; their frames also queue behind the
// interfering objects' on the one connection.
type criticalRouter struct {
	floor                  int
	thread, shared         http.RoundTripper
	threadSent, sharedSent prometheus.Counter
}

func newCriticalRouter(floor int, thread, shared http.RoundTripper, m *metrics) criticalRouter {
	return criticalRouter{floor: floor, thread: thread, shared: shared,
		threadSent: m.requests.WithLabelValues("thread"), sharedSent: m.requests.WithLabelValues("shared")}
}

func (r criticalRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	if p := PriorityFrom(req.Context()); p >= 0 && p >= r.floor && req.URL.Query().Get("watch") == "" {
		r.threadSent.Inc()
		return r.thread.RoundTrip(req)
	}
	r.sharedSent.Inc()
	return r.shared.RoundTrip(req)
}

// threadTransport builds the critical requests' transport from cfg, or
// says why it cannot: a custom transport or dialer, or a proxy in the way,
// which rthttp does not speak.
func threadTransport(cfg *rest.Config) (*rthttp.Transport, error) {
	if cfg.Transport != nil || cfg.Dial != nil {
		return nil, fmt.Errorf("the REST config has its own transport or dialer")
	}
	host, err := url.Parse(cfg.Host)
	if err != nil || host.Host == "" {
		// Host may lack a scheme ("127.0.0.1:6443"); client-go defaults it.
		host, err = url.Parse("https://" + cfg.Host)
		if err != nil {
			return nil, fmt.Errorf("host %q: %w", cfg.Host, err)
		}
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	if p, err := proxy(&http.Request{URL: host}); err != nil || p != nil {
		return nil, fmt.Errorf("requests to %s go through a proxy", host.Host)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("tls config: %w", err)
	}
	return rthttp.New(rthttp.Options{TLS: tlsCfg}), nil
}
