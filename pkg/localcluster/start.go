package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// controllers are the kube-controller-manager controllers Options.ControllerManager
// runs: what Deployments, Jobs, StatefulSets and DaemonSets need, namespace
// deletion and service accounts, and node lifecycle, without which the
// node.kubernetes.io/not-ready taint never leaves kwok's nodes.
var controllers = []string{
	"deployment-controller", "replicaset-controller", "garbage-collector-controller",
	"statefulset-controller", "daemonset-controller", "job-controller", "disruption-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller",
	"namespace-controller", "serviceaccount-controller", "root-ca-certificate-publisher-controller",
}

// errNotReady is what a readiness check returns while the answer is "not yet".
var errNotReady = errors.New("not ready")

// testExtraArgs lets this package's tests add flags to a component.
var testExtraArgs map[string][]string

// run writes the configuration, starts the components and waits for them.
func (c *Cluster) run(ctx context.Context) error {
	t0 := time.Now()
	if err := c.writeConfig(); err != nil {
		return err
	}
	c.progress("certificates and kubeconfigs written to %s", c.dir)

	etcd, err := c.startComponent("etcd", c.etcdArgs())
	if err != nil {
		return err
	}
	api, err := c.startComponent("kube-apiserver", c.apiserverArgs())
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "etcd /health", etcd, httpCheck(healthClient, c.etcdURL()+"/health", `"health":"true"`)); err != nil {
		return err
	}
	adminHTTP, err := rest.HTTPClientFor(c.admin)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", api, httpCheck(adminHTTP, c.admin.Host+"/readyz", "ok")); err != nil {
		return err
	}
	c.progress("etcd and kube-apiserver ready (%.1f s)", time.Since(t0).Seconds())

	if err := c.startClients(ctx); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "nodes Ready", nil, c.nodesReady); err != nil {
		return err
	}
	if c.opts.ControllerManager {
		if err := c.waitFor(ctx, "service account default/default", nil, c.defaultServiceAccount); err != nil {
			return err
		}
	}
	c.progress("ready in %.1f s: %d kwok node(s), %d process node(s); kubeconfig %s", time.Since(t0).Seconds(), c.opts.Nodes, c.opts.ProcessNodes, c.KubeconfigPath())
	return nil
}

// startClients starts kwok and the optional scheduler and controller manager,
// creates the nodes, and waits until each component answers its health check.
func (c *Cluster) startClients(ctx context.Context) error {
	type component struct {
		name    string
		enabled bool
		args    []string
		env     []string
		health  string
	}
	components := []component{
		{"kwok", c.opts.Nodes > 0, c.kwokArgs(), []string{"HOME=" + c.path("kwok")},
			fmt.Sprintf("http://127.0.0.1:%d/healthz", c.ports.kwok)},
		{"kube-controller-manager", c.opts.ControllerManager, c.controllerManagerArgs(), nil,
			fmt.Sprintf("https://127.0.0.1:%d/healthz", c.ports.controllerManager)},
		{"kube-scheduler", c.opts.Scheduler, c.schedulerArgs(), nil,
			fmt.Sprintf("https://127.0.0.1:%d/healthz", c.ports.scheduler)},
	}
	started := map[string]*process{}
	for _, comp := range components {
		if comp.enabled {
			p, err := c.startComponent(comp.name, comp.args, comp.env...)
			if err != nil {
				return err
			}
			started[comp.name] = p
		}
	}
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if err := c.startProcessNodes(ctx); err != nil {
		return err
	}
	for _, comp := range components {
		if p := started[comp.name]; p != nil {
			if err := c.waitFor(ctx, comp.name+" /healthz", p, httpCheck(healthClient, comp.health, "ok")); err != nil {
				return err
			}
		}
	}
	return nil
}

// healthClient reads the components' health endpoints. They serve
// self-signed certificates on loopback and only their health is read, so the
// certificates are not verified.
var healthClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
	DisableKeepAlives: true,
}}

func (c *Cluster) startComponent(name string, args []string, env ...string) (*process, error) {
	args = append(args, testExtraArgs[name]...)
	p, err := startProcess(name, binPath(name), args, env, c.path("logs", name+".log"))
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// waitFor polls check every 50 ms until it returns nil. It fails as soon as
// any component exits, quoting that component's log; on ctx expiry it quotes
// owner's log, if owner is set.
func (c *Cluster) waitFor(ctx context.Context, what string, owner *process, check func(context.Context) error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		last := check(ctx)
		if last == nil {
			return nil
		}
		for _, p := range c.procs {
			if p.exited() {
				return p.exitError()
			}
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("waiting for %s: %w (last check: %v)", what, ctx.Err(), last)
			if owner != nil {
				err = fmt.Errorf("%w; last lines of %s:\n%s", err, owner.logPath, tailFile(owner.logPath, logTailLines))
			}
			return err
		case <-tick.C:
		}
	}
}

// httpCheck returns a check that GETs url and wants status 200 and a body
// containing want.
func httpCheck(client *http.Client, url, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			return fmt.Errorf("%s: %s: %.200s", url, resp.Status, body)
		}
		return nil
	}
}

func (c *Cluster) etcdURL() string { return fmt.Sprintf("http://127.0.0.1:%d", c.ports.etcdClient) }

// writeConfig writes the PKI, the kubeconfigs and kwok's configuration, and
// sets the admin client.
func (c *Cluster) writeConfig() error {
	if len(c.opts.AuditPolicy) > 0 {
		if err := writeFile(c.path("audit-policy.yaml"), c.opts.AuditPolicy); err != nil {
			return err
		}
	}
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	c.ca = ca
	serving, err := ca.server()
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"ca.crt": ca.certPEM, "apiserver.crt": serving.certPEM, "apiserver.key": serving.keyPEM,
	} {
		if err := writeFile(c.path("pki", name), data); err != nil {
			return err
		}
	}
	if err := writeServiceAccountKeys(c.path("pki", "sa.key"), c.path("pki", "sa.pub")); err != nil {
		return err
	}
	if err := c.writeKubeconfigs(ca); err != nil {
		return err
	}
	if err := c.writeKubeletClientCert(); err != nil {
		return err
	}
	return c.writeKwokConfig()
}

// kubeconfigUsers maps each kubeconfig file to the user in its client
// certificate: the components get their own identities, which the bootstrap
// RBAC roles and the API Priority and Fairness flow schemas recognise.
var kubeconfigUsers = map[string][]string{
	"kubeconfig":                         {"gantry-admin", "system:masters"},
	"kube-controller-manager.kubeconfig": {"system:kube-controller-manager"},
	"kube-scheduler.kubeconfig":          {"system:kube-scheduler"},
	"kwok.kubeconfig":                    {"kwok", "system:masters"},
}

func (c *Cluster) writeKubeconfigs(ca *authority) error {
	server := fmt.Sprintf("https://127.0.0.1:%d", c.ports.apiserver)
	for file, user := range kubeconfigUsers {
		id, err := ca.client(user[0], user[1:]...)
		if err != nil {
			return err
		}
		if err := clientcmd.WriteToFile(*kubeconfig(server, ca.certPEM, id), c.path(file)); err != nil {
			return err
		}
		if file == "kubeconfig" {
			c.admin = &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{
				CAData: ca.certPEM, CertData: id.certPEM, KeyData: id.keyPEM,
			}}
		}
	}
	// Start's own client is not rate-limited: it polls every 50 ms and
	// creates one node per request.
	internal := rest.CopyConfig(c.admin)
	internal.QPS = -1
	client, err := kubernetes.NewForConfig(internal)
	c.client = client
	return err
}

func kubeconfig(server string, caPEM []byte, id identity) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["gantry"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["gantry"] = &clientcmdapi.AuthInfo{ClientCertificateData: id.certPEM, ClientKeyData: id.keyPEM}
	cfg.Contexts["gantry"] = &clientcmdapi.Context{Cluster: "gantry", AuthInfo: "gantry"}
	cfg.CurrentContext = "gantry"
	return cfg
}
