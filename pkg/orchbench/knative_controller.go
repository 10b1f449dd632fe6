package orchbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"gantry.dev/gantry/pkg/knativert"
	"gantry.dev/gantry/pkg/rtcontroller"
)

// startGantryProcess runs `gantry controller --knative` as a process of
// its own, as a cluster runs it beside Knative, while vanilla's
// kube-controller-manager is a process of its own too: in this process
// it would share the Go runtime with the process node, the ingress and
// the traffic. It runs as the controller's service account (its
// kubeconfig impersonates it), its webhook on loopback registered by URL.
// It returns once the webhook is registered and the controller ready; the
// returned func removes the registration, stops the process (SIGTERM)
// and removes its folder.
func (k *knRun) startGantryProcess(ctx context.Context, ctl string) (func() error, error) {
	dir, err := os.MkdirTemp("", "gantry-orchbench-controller-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeControllerKubeconfig(k.kubeconfigSource(), kubeconfig); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("free ports for the controller: %w", err)
	}
	hook, health := ports[0], ports[1]
	url := "https://" + hook + knativert.WebhookPath
	// The controller's service account may only patch the webhook
	// configuration's caBundle (config/knative/rbac.yaml): the benchmark
	// registers it with the URL, as an admin applies config/knative, and
	// gives the controller the certificate it made (no ca.crt, so the
	// controller leaves the caBundle alone).
	if err := k.registerWebhook(ctx, dir, url); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	argv := append(append([]string{}, k.opts.KN.ControllerCommand...),
		"--kubeconfig", kubeconfig, "--http-address", health, "--knative",
		"--knative-webhook-address", hook, "--knative-webhook-cert-dir", filepath.Join(dir, "certs"),
		"--trace-file", filepath.Join(dir, "traces.jsonl"))
	logPath := filepath.Join(dir, "controller.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childProcAttr()
	if err = cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	tailCtx, stopTail := context.WithCancel(ctx)
	tailDone := make(chan struct{})
	go func() { defer close(tailDone); tailTraces(tailCtx, filepath.Join(dir, "traces.jsonl"), k.traces.add) }()
	stop := func() error {
		k.logMetrics(health)
		stopTail()
		<-tailDone
		var err error
		if ctx.Err() == nil || k.opts.Kubeconfig != "" {
			// Only a cluster that outlives the run needs it gone (a
			// registration without its server refuses Knative's writes).
			bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			err = k.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(bg, knativert.WebhookConfigurationName, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				err = fmt.Errorf("remove the webhook's registration: %w", err)
			} else {
				err = nil
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited // Wait returns once the process is gone
			err = errors.Join(err, errors.New("gantry controller: did not stop within 5 s of SIGTERM"))
		}
		logf.Close()
		k.logFailures(logPath)
		os.RemoveAll(dir)
		return err
	}
	if err := k.waitControllerReady(ctx, health, exited, &exitErr); err != nil {
		tail := logTail(logPath)
		_ = stop()
		return nil, fmt.Errorf("%w; its log ends: %s", err, tail)
	}
	k.logf("%s: `%s` runs as a process of its own, its webhook at %s", ctl, strings.Join(argv, " "), url)
	return stop, nil
}

// kubeconfigSource is the admin kubeconfig the run uses.
func (k *knRun) kubeconfigSource() string {
	if k.opts.Kubeconfig != "" {
		return k.opts.Kubeconfig
	}
	return k.clusterKubeconfig
}

// writeControllerKubeconfig copies the admin kubeconfig at src to dst,
// impersonating the controller's service account, so RBAC and API Priority
// and Fairness treat the controller as a deployed one.
func writeControllerKubeconfig(src, dst string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = controllerSA, controllerGroups
	}
	return clientcmd.WriteToFile(*cfg, dst)
}

// waitControllerReady waits for the controller's /readyz: Services
// created before its webhook serves would wait for it.
func (k *knRun) waitControllerReady(ctx context.Context, health string, exited <-chan struct{}, exitErr *error) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("gantry controller exited: %v", *exitErr)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+health+"/readyz", nil)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = "/readyz: " + resp.Status
			return false, nil
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("gantry controller not ready: %w (%s)", err, last)
	}
	return err
}

// registerWebhook makes the webhook's certificate into dir/certs and
// registers the webhook configuration with url and its CA.
func (k *knRun) registerWebhook(ctx context.Context, dir, url string) error {
	cert, ca, err := knativert.Certificate(knativert.ServeOptions{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		return err
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return err
	}
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certs, "tls.crt"), chain, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certs, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		return err
	}
	return knativert.Register(ctx, k.kube, url, ca)
}

// freePorts are n distinct free host:ports on 127.0.0.1: each listener is
// held until all are picked.
func freePorts(n int) ([]string, error) {
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

func logTail(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(raw) > 2000 {
		raw = raw[len(raw)-2000:]
	}
	return string(raw)
}

// tailTraces reads the controller's trace file (JSON lines of
// rtcontroller.ReconcileTrace) as it grows, until ctx ends, and hands
// each trace to add.
func tailTraces(ctx context.Context, path string, add func(rtcontroller.ReconcileTrace)) {
	var (
		off  int64
		part []byte
	)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if f, err := os.Open(path); err == nil {
			if _, err := f.Seek(off, io.SeekStart); err == nil {
				buf, _ := io.ReadAll(io.LimitReader(f, maxTraceRead))
				off += int64(len(buf))
				part = append(part, buf...)
				for {
					line, rest, ok := bytes.Cut(part, []byte("\n"))
					if !ok {
						break
					}
					var tr rtcontroller.ReconcileTrace
					if json.Unmarshal(line, &tr) == nil {
						add(tr)
					}
					part = rest
				}
				part = bytes.Clone(part)
			}
			f.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// maxTraceRead bounds one read of the trace file.
const maxTraceRead = 16 << 20

// logMetrics writes the controller's reconcile, queue and client
// counters into the run's log before it stops: conflicts, retries, queue
// waits and requests by connection say where a slow scale-up waited.
func (k *knRun) logMetrics(health string) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + health + "/metrics")
	if err != nil {
		k.logf("gantry controller /metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "gantry_") && !strings.Contains(line, "_bucket{") {
			k.logf("   controller metric %s", line)
		}
	}
}

// logFailures puts the controller's failed reconciles into the run's
// log before its folder goes: how many, and the first of each kind.
func (k *knRun) logFailures(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	kinds := map[string]int{}
	var order []string
	sc := bufio.NewScanner(io.LimitReader(f, maxTraceRead))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "reconcile failed") {
			continue
		}
		_, msg, _ := strings.Cut(line, "err=")
		// The kind is the message without the object's name.
		kind := msg
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			kind = msg[i+2:]
		}
		if kinds[kind] == 0 {
			order = append(order, kind)
		}
		kinds[kind]++
	}
	total := 0
	for _, n := range kinds {
		total += n
	}
	if total > 0 {
		k.logf("   controller: %d failed reconciles, %d kinds of error; the first:", total, len(order))
	}
	for _, kind := range order[:min(len(order), 5)] {
		k.logf("   controller: %d x %s", kinds[kind], kind)
	}
}
