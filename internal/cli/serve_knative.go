//go:build !gantry_local

package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"gantry.dev/gantry/pkg/knativeingress"
)

// knativeIngressFlags run Gantry as Knative's ingress beside the gateway
// (--knative-ingress): KIngresses of the class
// gantry.ingress.networking.knative.dev, served on two listeners.
type knativeIngressFlags struct {
	enabled             bool
	addr, localAddr     string
	httpsAddr           string
	httpsPort           int
	publicLB, privateLB string
	timeout             time.Duration
	cmd                 *cobra.Command
	srv                 *knativeingress.Server
}

func (f *knativeIngressFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	fs := cmd.Flags()
	fs.BoolVar(&f.enabled, "knative-ingress", false, "also serve Knative's KIngresses of the class "+knativeingress.Class+" (needs a kubeconfig: --kubeconfig, $KUBECONFIG, ...)")
	fs.StringVar(&f.addr, "knative-ingress-addr", "127.0.0.1:8081", "with --knative-ingress: where Knative Services are reached by their host names (ExternalIP rules)")
	fs.StringVar(&f.localAddr, "knative-ingress-local-addr", "127.0.0.1:8082", "with --knative-ingress: the cluster-local listener (every rule, ClusterLocal ones included)")
	fs.StringVar(&f.httpsAddr, "knative-ingress-https-addr", "", "with --knative-ingress: serve the ExternalIP rules over HTTPS here too, with the certificates of the Ingresses' spec.tls picked by SNI, from Secrets of type kubernetes.io/tls it lists and watches in every namespace (\"\": no HTTPS; Ingresses with spec.tls or httpOption Redirected are then refused)")
	fs.IntVar(&f.httpsPort, "knative-ingress-https-port", 0, "with --knative-ingress-https-addr: the port clients reach HTTPS at, which httpOption Redirected's redirects name (0: the listener's)")
	fs.StringVar(&f.publicLB, "knative-ingress-public-lb", knativeingress.DefaultPublicLB, "with --knative-ingress: the Ingresses' status.publicLoadBalancer: a non-loopback IP address or a DNS name")
	fs.StringVar(&f.privateLB, "knative-ingress-local-lb", knativeingress.DefaultPrivateLB, "with --knative-ingress: the Ingresses' status.privateLoadBalancer, which Knative's Routes point their Services at: a non-loopback IP address or a DNS name")
	fs.DurationVar(&f.timeout, "knative-ingress-timeout", knativeingress.DefaultTimeout, "with --knative-ingress: longest a request may take through the ingress (504 past it)")
}

func (f *knativeIngressFlags) validate() error {
	if !f.enabled {
		for _, name := range []string{"knative-ingress-addr", "knative-ingress-local-addr", "knative-ingress-https-addr", "knative-ingress-https-port",
			"knative-ingress-public-lb", "knative-ingress-local-lb", "knative-ingress-timeout"} {
			if f.cmd != nil && f.cmd.Flags().Changed(name) {
				return usagef("--%s needs --knative-ingress", name)
			}
		}
		return nil
	}
	for _, a := range []struct{ flag, v string }{{"--knative-ingress-addr", f.addr}, {"--knative-ingress-local-addr", f.localAddr},
		{"--knative-ingress-https-addr", f.httpsAddr}} {
		if a.v == "" && a.flag == "--knative-ingress-https-addr" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			return usagef("%s: %v", a.flag, err)
		}
	}
	switch {
	case f.httpsPort != 0 && f.httpsAddr == "":
		return usagef("--knative-ingress-https-port needs --knative-ingress-https-addr")
	case f.httpsPort < 0 || f.httpsPort > 65535:
		return usagef("--knative-ingress-https-port must be in [1, 65535], got %d", f.httpsPort)
	}
	for _, lb := range []struct{ flag, v string }{{"--knative-ingress-public-lb", f.publicLB}, {"--knative-ingress-local-lb", f.privateLB}} {
		if err := knativeingress.CheckLoadBalancer(lb.v); err != nil {
			return usagef("%s: %v", lb.flag, err)
		}
	}
	if f.timeout <= 0 || f.timeout > knativeingress.MaxTimeout {
		return usagef("--knative-ingress-timeout must be in (0, %v], got %v", knativeingress.MaxTimeout, f.timeout)
	}
	return nil
}

// start starts the ingress when asked to, with the kubeconfig of
// --kubeconfig (else $KUBECONFIG, ~/.kube/config, in-cluster).
func (f *knativeIngressFlags) start(kubeconfig string, logger *slog.Logger) error {
	if !f.enabled {
		return nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("--knative-ingress: load kubeconfig: %w", err)
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	f.srv, err = knativeingress.StartListeners(knativeingress.Config{Kube: kc, Dynamic: dc, PublicLoadBalancer: f.publicLB,
		PrivateLoadBalancer: f.privateLB, HTTPSPort: f.httpsPort, Timeout: f.timeout, Logger: logger},
		knativeingress.Listeners{External: f.addr, Local: f.localAddr, HTTPS: f.httpsAddr})
	if err != nil {
		return fmt.Errorf("--knative-ingress: %w", err)
	}
	attrs := []any{"class", knativeingress.Class, "url", "http://" + f.srv.ExternalAddr(), "cluster-local", "http://" + f.srv.LocalAddr(), "api", rc.Host}
	if a := f.srv.HTTPSAddr(); a != "" {
		attrs = append(attrs, "https", "https://"+a)
	}
	logger.Info("knative ingress listening", attrs...)
	return nil
}

// shutdown drains the ingress until ctx ends.
func (f *knativeIngressFlags) shutdown(ctx context.Context) error {
	if f.srv == nil {
		return nil
	}
	return f.srv.Shutdown(ctx)
}

// hurry cuts the ingress's drain short.
func (f *knativeIngressFlags) hurry() {
	if f.srv != nil {
		f.srv.Hurry()
	}
}
