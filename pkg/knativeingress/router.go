package knativeingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// router serves requests by the current routing table, which the
// reconciler swaps whole: a request sees one table from start to end, so
// an update never leaves a request half-routed.
type router struct {
	table   atomic.Pointer[table]
	backend *resolver
	timeout time.Duration
	// httpsPort is the port redirects to HTTPS name (none when 443).
	httpsPort int
	logger    *slog.Logger
	h1, h2c   *httputil.ReverseProxy
}

// listener says which listener a handler serves.
type listener int

const (
	externalHTTP  listener = iota // ExternalIP rules; redirects
	localHTTP                     // every rule
	externalHTTPS                 // ExternalIP rules, by SNI
)

// forward is what the proxies' Rewrite needs of a request, passed in its
// context.
type forward struct {
	url  *url.URL
	host string
	set  []header
}

type forwardKey struct{}

func newRouter(res *resolver, timeout time.Duration, httpsPort int, logger *slog.Logger) *router {
	rt := &router{backend: res, timeout: timeout, httpsPort: httpsPort, logger: logger}
	rt.table.Store(newTable())
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	h1 := &http.Transport{DialContext: dialer.DialContext, MaxIdleConns: 1000, MaxIdleConnsPerHost: 100,
		IdleConnTimeout: 90 * time.Second}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Transport{DialContext: dialer.DialContext, Protocols: &p, IdleConnTimeout: 90 * time.Second}
	rt.h1 = rt.proxy(h1)
	rt.h2c = rt.proxy(h2)
	return rt
}

func (rt *router) proxy(tr http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			f := pr.In.Context().Value(forwardKey{}).(*forward)
			pr.SetURL(f.url)
			pr.Out.Host = f.host
			pr.SetXForwarded()
			for _, h := range f.set {
				pr.Out.Header.Set(h.name, h.value)
			}
		},
		// Streams (server-sent events, gRPC) go out as they come.
		FlushInterval: -1,
		ErrorHandler:  rt.proxyError,
		// Copy errors (a client cancelling a stream) go to the ingress's
		// log, not the process's standard logger.
		ErrorLog: slog.NewLogLogger(rt.logger.Handler(), slog.LevelDebug),
	}
}

func (rt *router) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		http.Error(w, fmt.Sprintf("knative ingress: no answer within %v", rt.timeout), http.StatusGatewayTimeout)
		return
	}
	if r.Context().Err() != nil {
		return // the client went away
	}
	rt.logger.Warn("knative ingress: backend", "host", r.Host, "path", r.URL.Path, "err", err)
	http.Error(w, "knative ingress: backend: "+err.Error(), http.StatusBadGateway)
}

// handler serves one listener: the external ones route ExternalIP rules
// only, the cluster-local one every rule.
func (rt *router) handler(l listener) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := rt.table.Load()
		routes := &t.external
		if l == localHTTP {
			routes = &t.local
		}
		host := hostOnly(r.Host)
		if l == externalHTTPS && !sameCertificate(t, r, host) {
			http.Error(w, fmt.Sprintf("knative ingress: host %q is not served by the certificate of this connection's server name %q", host, r.TLS.ServerName),
				http.StatusMisdirectedRequest)
			return
		}
		m := routes.match(host, r)
		if m == nil {
			http.Error(w, fmt.Sprintf("knative ingress: no rule for host %q and path %q", host, r.URL.Path), http.StatusNotFound)
			return
		}
		if l == externalHTTP && m.redirect {
			http.Redirect(w, r, rt.httpsURL(r), http.StatusMovedPermanently)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), rt.timeout)
		defer cancel()
		rt.serve(w, r.WithContext(ctx), t, m, 0)
	})
}

// serve sends r by route m: the path's headers, then a split's, set on
// the request; then to the split's endpoints, or, for an ExternalName
// backend (Knative points those at this ingress), routed once more by
// the cluster-local table under the (rewritten) host.
func (rt *router) serve(w http.ResponseWriter, r *http.Request, t *table, m *route, depth int) {
	set := make([]header, 0, len(m.set)+4)
	if r.Header.Get(hashHeader) == hashOverride {
		set = append(set, header{hashHeader, m.hash})
	}
	set = append(set, m.set...)
	s := m.pick()
	set = append(set, s.set...)
	host := r.Host
	if m.rewrite != "" {
		host = m.rewrite
	}
	external, err := rt.backend.external(s.backend)
	if err != nil {
		rt.unavailable(w, err)
		return
	}
	if external {
		rt.reroute(w, r, t, host, set, depth)
		return
	}
	tg, err := rt.backend.resolve(s.backend)
	if err != nil {
		rt.unavailable(w, err)
		return
	}
	p := rt.h1
	if tg.h2c {
		p = rt.h2c
	}
	f := &forward{url: &url.URL{Scheme: "http", Host: tg.addr}, host: host, set: set}
	p.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardKey{}, f)))
}

// reroute routes a request bound for this ingress's own load balancer
// again, by the cluster-local table; once, so a loop of ExternalName
// Services ends.
func (rt *router) reroute(w http.ResponseWriter, r *http.Request, t *table, host string, set []header, depth int) {
	if depth > 0 {
		http.Error(w, "knative ingress: an ExternalName backend routed back to an ExternalName backend", http.StatusLoopDetected)
		return
	}
	r2 := r.Clone(r.Context())
	r2.Host = host
	for _, h := range set {
		r2.Header.Set(h.name, h.value)
	}
	m := t.local.match(hostOnly(host), r2)
	if m == nil {
		http.Error(w, fmt.Sprintf("knative ingress: no rule for host %q and path %q", host, r.URL.Path), http.StatusNotFound)
		return
	}
	rt.serve(w, r2, t, m, depth+1)
}

func (rt *router) unavailable(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "knative ingress: "+err.Error(), http.StatusServiceUnavailable)
}

// sameCertificate says whether a request over TLS names a host that the
// connection's certificate (chosen by SNI) serves: clients reuse a
// connection for another host only when its certificate covers it (RFC
// 9110 section 7.4); any other host is answered 421, so the client opens
// a connection of its own.
func sameCertificate(t *table, r *http.Request, host string) bool {
	sni := strings.ToLower(r.TLS.ServerName)
	if host == sni {
		return true
	}
	c, ok := t.certs[host]
	return ok && c == t.certs[sni]
}

// httpsURL is where a redirected request goes: https, the same host and
// request URI, at the HTTPS port clients use (left out when 443).
func (rt *router) httpsURL(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]") // an IPv6 literal
	switch {
	case rt.httpsPort != 443:
		host = net.JoinHostPort(host, strconv.Itoa(rt.httpsPort))
	case strings.Contains(host, ":"):
		host = "[" + host + "]"
	}
	return (&url.URL{Scheme: "https", Host: host}).String() + r.URL.RequestURI()
}

// hostOnly is a Host header without its port, lower case.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
