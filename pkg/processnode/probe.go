package processnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeClient runs HTTP probes: no keep-alive (each probe is a fresh
// connection, as a kubelet's), no redirects followed beyond the default,
// and HTTPS without verification, as a kubelet does.
var probeClient = &http.Client{Transport: &http.Transport{
	DisableKeepAlives: true,
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a kubelet does not verify probe targets either
}}

// probeTarget is what a probe needs of its container.
type probeTarget struct {
	ip     string
	ports  []corev1.ContainerPort
	env    []string
	dir    string
	netns  string  // exec probes run in the pod's network namespace
	mounts []mount // with the container's mounts
}

func (t probeTarget) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal < 1 || p.IntVal > 65535 {
			return 0, fmt.Errorf("port %d out of range", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	for _, cp := range t.ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
}

// checkProbe validates a probe when the pod is created, so an unsupported
// one fails the pod instead of silently never passing.
func checkProbe(kind string, p *corev1.Probe, t probeTarget) error {
	if p == nil {
		return nil
	}
	h := p.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		if s := h.HTTPGet.Scheme; s != "" && s != corev1.URISchemeHTTP && s != corev1.URISchemeHTTPS {
			return fmt.Errorf("%s probe: scheme %q", kind, s)
		}
		_, err := t.port(h.HTTPGet.Port)
		return wrapProbe(kind, err)
	case h.TCPSocket != nil:
		_, err := t.port(h.TCPSocket.Port)
		return wrapProbe(kind, err)
	case h.Exec != nil:
		if len(h.Exec.Command) == 0 {
			return fmt.Errorf("%s probe: empty exec command", kind)
		}
		return nil
	case h.GRPC != nil:
		return fmt.Errorf("%s probe: gRPC probes are not supported by the process node", kind)
	}
	return fmt.Errorf("%s probe: no handler", kind)
}

func wrapProbe(kind string, err error) error {
	if err != nil {
		return fmt.Errorf("%s probe: %w", kind, err)
	}
	return nil
}

// runProbe runs p once against t; nil is success.
func runProbe(ctx context.Context, p *corev1.Probe, t probeTarget) error {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := p.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		return httpProbe(ctx, h.HTTPGet, t)
	case h.TCPSocket != nil:
		port, err := t.port(h.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = t.ip
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case h.Exec != nil:
		argv := h.Exec.Command
		if t.netns != "" {
			path, err := lookPath(argv[0], t.env, t.dir)
			if err != nil {
				return err
			}
			if _, argv, err = netnsArgv(t.netns, path, argv, t.mounts); err != nil {
				return err
			}
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = t.env, t.dir
		// A group of its own, so the timeout kills what it started; no
		// parent-death signal, which would tie it to this goroutine's
		// thread (the probe is bounded by its timeout anyway).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { signalGroup(cmd.Process.Pid, syscall.SIGKILL); return nil }
		cmd.WaitDelay = time.Second
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %.200s", err, out)
		}
		return nil
	}
	return errors.New("no probe handler")
}

func httpProbe(ctx context.Context, g *corev1.HTTPGetAction, t probeTarget) error {
	port, err := t.port(g.Port)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = t.ip
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	u, err = u.Parse(path)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/processnode")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
		} else {
			req.Header.Add(h.Name, h.Value)
		}
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe %s: %s", u, resp.Status)
	}
	return nil
}

// probeState counts consecutive results against a probe's thresholds.
type probeState struct {
	probe            *corev1.Probe
	successes, fails int32
	passing, decided bool
}

// observe records one result and reports whether the verdict changed.
func (s *probeState) observe(err error) (changed bool) {
	succ := max(s.probe.SuccessThreshold, 1)
	fail := s.probe.FailureThreshold
	if fail <= 0 {
		fail = 3
	}
	if err == nil {
		s.successes++
		s.fails = 0
		if s.successes >= succ && (!s.passing || !s.decided) {
			s.passing, s.decided = true, true
			return true
		}
		return false
	}
	s.fails++
	s.successes = 0
	if s.fails >= fail && (s.passing || !s.decided) {
		s.passing, s.decided = false, true
		return true
	}
	return false
}

func (s *probeState) period() time.Duration {
	if s.probe.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(s.probe.PeriodSeconds) * time.Second
}
