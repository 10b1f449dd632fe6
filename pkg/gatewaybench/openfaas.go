package gatewaybench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"time"
)

// openfaasPorts are the ports the OpenFaaS gateway binds, on every
// interface: its main.go fixes 8080 (API) and 8082 (metrics), and no
// environment variable moves them. A variable only so that tests can run a
// fake gateway on free ports.
var openfaasPorts = [2]int{8080, 8082}

// startOpenFaaS starts the OpenFaaS gateway against the provider at
// providerURL and waits until its API forwards to that provider. A nil
// child with a note means its path is skipped, and why; an error is only
// for a cancelled ctx.
func startOpenFaaS(ctx context.Context, o Options, providerURL, nonce string, gomaxprocs int) (*child, string, error) {
	if o.OpenFaaS == "" {
		return nil, "OpenFaaS gateway not measured: no binary given", nil
	}
	if note := checkBinary(o.OpenFaaS); note != "" {
		return nil, note, nil
	}
	for _, port := range openfaasPorts {
		if note := checkPortFree(port); note != "" {
			return nil, note, nil
		}
	}
	c, err := startChild(ctx, []string{o.OpenFaaS}, openfaasEnv(providerURL, gomaxprocs, o.GOGC), o.OpenFaaSLog, false)
	if err != nil {
		return nil, fmt.Sprintf("OpenFaaS gateway not measured: %v", err), nil
	}
	c.url = fmt.Sprintf("http://127.0.0.1:%d", openfaasPorts[0])
	if note, err := c.waitNonce(ctx, nonce, o.ReadyWait); note != "" || err != nil {
		c.stop()
		return nil, note, err
	}
	return c, "", nil
}

// openfaasEnv is the child's whole environment. Nothing is inherited: a
// proxy variable, basic_auth or a NATS address from the caller's shell
// would change what is measured. The configuration is the lean one (no
// auth, no scale-from-zero, no async queue), the fastest the gateway runs.
func openfaasEnv(providerURL string, gomaxprocs, gogc int) []string {
	return append([]string{
		"functions_provider_url=" + providerURL,
		"basic_auth=false",
		"scale_from_zero=false",
		// OpenFaaS's docs ask for upstream below write, both generous: a
		// timeout never fires for an echo, and must not cut a slow round.
		"read_timeout=30s",
		"write_timeout=30s",
		"upstream_timeout=20s",
	}, runtimeEnv(gomaxprocs, gogc)...)
}

func checkBinary(path string) string {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("OpenFaaS gateway not measured: no binary at %s (build it with hack/build-openfaas.sh; `make bench-gateway` runs it)", path)
	case err != nil:
		return fmt.Sprintf("OpenFaaS gateway not measured: %v", err)
	case st.IsDir() || st.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("OpenFaaS gateway not measured: %s is not an executable file", path)
	}
	return ""
}

// checkPortFree binds the port as the gateway will (all interfaces) and
// lets it go. It cannot reserve the port, but a port busy now is the usual
// case (a `gantry serve` on its default 127.0.0.1:8080), and a port taken
// in between is caught by waitReady's nonce check.
func checkPortFree(port int) string {
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return fmt.Sprintf("OpenFaaS gateway not measured: port %d is in use (%v); the gateway binds :%d and :%d, fixed in its source, so free them first",
			port, err, openfaasPorts[0], openfaasPorts[1])
	}
	_ = ln.Close()
	return ""
}

// waitNonce polls the gateway's /healthz, which it forwards to the
// provider, until the provider's nonce comes back: that proves both that
// the gateway is up and that the process answering on the port is ours.
func (c *child) waitNonce(ctx context.Context, nonce string, bound time.Duration) (string, error) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		resp, err := client.Get(c.url + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == nonce {
				return "", nil
			}
			last = fmt.Sprintf("HTTP %d %q", resp.StatusCode, truncate(string(body), 80))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-c.exited:
			return fmt.Sprintf("OpenFaaS gateway not measured: it exited before answering (%v); its log ends: %s",
				c.err, c.logTail()), nil
		case <-deadline.C:
			return fmt.Sprintf("OpenFaaS gateway not measured: no answer forwarded to our provider on %s/healthz within %v (last: %s); its log ends: %s",
				c.url, bound, last, c.logTail()), nil
		case <-tick.C:
		}
	}
}
