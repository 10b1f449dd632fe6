package gatewaybench

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Provider is the smallest OpenFaaS provider the OpenFaaS gateway runs
// against: it lists one function and forwards /function/NAME[/PATH] to the
// instance's /PATH, which is what faas-netes and faasd do for a deployed
// function once the gateway has handed them the call. It is also loaded on
// its own (the provider path), so the OpenFaaS gateway's own hop can be
// told apart from this one's.
type Provider struct {
	fn     string
	target *url.URL
	// nonce is the /healthz body: the benchmark checks that what answers
	// on the OpenFaaS gateway's fixed port forwards to this provider, and
	// not to some other server that took the port.
	nonce string
	proxy *httputil.ReverseProxy
	mux   *http.ServeMux
}

// NewProvider serves function fn from the instance at instanceAddr
// (host:port).
func NewProvider(fn, instanceAddr, nonce string) *Provider {
	p := &Provider{fn: fn, target: &url.URL{Scheme: "http", Host: instanceAddr}, nonce: nonce, mux: http.NewServeMux()}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: p.rewrite,
		// Tuned as a real provider's (and both gateways') client is: a
		// default transport keeps 2 idle connections per host, so at
		// 1000 requests/s it would mostly measure TCP handshakes.
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fmt.Sprintf("provider: instance unreachable: %v", err), http.StatusBadGateway)
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.mux.HandleFunc("GET /system/functions", p.list)
	p.mux.HandleFunc("GET /system/function/{name}", p.status)
	// An empty namespace list tells the gateway's metrics watcher that
	// this provider has no namespaces, as faasd answers.
	p.mux.HandleFunc("GET /system/namespaces", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, []string{}) })
	p.mux.HandleFunc("GET /system/info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"provider": map[string]any{"provider": "gantry-bench", "orchestration": "static",
			"version": map[string]string{"release": "bench"}}, "arch": "x86_64"})
	})
	p.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(p.nonce)) })
	p.mux.HandleFunc("/function/{name}", p.invoke)
	p.mux.HandleFunc("/function/{name}/{path...}", p.invoke)
	return p
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

// functionStatus holds the fields of OpenFaaS's FunctionStatus that the
// gateway and faas-cli read.
type functionStatus struct {
	Name              string  `json:"name"`
	Image             string  `json:"image"`
	Namespace         string  `json:"namespace,omitempty"`
	Replicas          uint64  `json:"replicas"`
	AvailableReplicas uint64  `json:"availableReplicas"`
	InvocationCount   float64 `json:"invocationCount"`
}

func (p *Provider) statusOf() functionStatus {
	return functionStatus{Name: p.fn, Image: "gantry-bench/echo", Replicas: 1, AvailableReplicas: 1}
}

func (p *Provider) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, []functionStatus{p.statusOf()})
}

func (p *Provider) status(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("name") != p.fn {
		http.Error(w, "function not found", http.StatusNotFound)
		return
	}
	writeJSON(w, p.statusOf())
}

func (p *Provider) invoke(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("name") != p.fn {
		http.Error(w, fmt.Sprintf("function %q not found", r.PathValue("name")), http.StatusNotFound)
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// rewrite sends /function/NAME/PATH to the instance's /PATH, query kept.
func (p *Provider) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme = p.target.Scheme
	pr.Out.URL.Host = p.target.Host
	pr.Out.URL.Path = "/" + pr.In.PathValue("path")
	pr.Out.URL.RawPath = ""
	pr.Out.Host = p.target.Host
	pr.SetXForwarded()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
