package loadgen

import (
	"net"
	"net/http"
	"time"
)

// NewClient returns a client tuned for many concurrent requests to one host:
// up to maxConns idle connections are kept for that host (the default keeps
// 2, so an open-loop run would otherwise open and close a connection for
// almost every request and measure TCP handshakes instead of the server).
// It does not follow the client-wide Timeout; Run bounds each request itself.
func NewClient(maxConns int) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          maxConns,
		MaxIdleConnsPerHost:   maxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Responses are read and thrown away; asking for gzip would only
		// add compression time to the server's latency. No proxy either:
		// a proxy from the environment would be measured with the target.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
	}
	return &http.Client{Transport: transport}
}
