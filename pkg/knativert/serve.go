package knativert

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"gantry.dev/gantry/config/knative"
)

// WebhookConfigurationName is the MutatingWebhookConfiguration in
// config/knative/webhook.yaml.
const WebhookConfigurationName = "gantry-knative-rtresources"

// ServeOptions says how the webhook is served and how the apiserver finds
// it.
type ServeOptions struct {
	// CertDir holds tls.crt and tls.key. Empty: the controller makes a CA
	// and a certificate for Hosts at start-up and puts the CA into the
	// webhook configuration's caBundle, as Knative's webhook does.
	CertDir string
	// Hosts are the DNS names and IP addresses of a generated certificate.
	Hosts []string
	// URL, if set, is where the apiserver reaches the webhook (out of
	// cluster: https://127.0.0.1:PORT/mutate on the apiserver's host). The
	// controller then writes the webhook configuration itself, from
	// config/knative with clientConfig.url; otherwise it only patches
	// caBundle into the configuration config/knative installed.
	URL string
}

// DefaultHosts are the names the in-cluster Service answers to.
var DefaultHosts = []string{"gantry-knative-webhook.gantry-system.svc", "gantry-knative-webhook.gantry-system.svc.cluster.local"}

// ValidateURL checks a --knative-webhook-url: https, a host, no query or
// fragment, as the apiserver requires of clientConfig.url.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q: want https://HOST[:PORT][/PATH] with no user, query or fragment", raw)
	}
	return nil
}

// Serve serves h at WebhookPath on ln over TLS with cert until ctx ends.
// Register first, so the apiserver trusts and finds it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, cert tls.Certificate) error {
	mux := http.NewServeMux()
	mux.Handle(WebhookPath, h)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		// A review takes milliseconds; the apiserver's kept-alive HTTP/2
		// connection takes about a second to close after GOAWAY, longer
		// than a stop may (a second in all), so it is cut after a short grace.
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		err := srv.Shutdown(sctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = srv.Close()
		}
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
}

// shutdownGrace is how long a stopping webhook lets requests in flight
// finish.
const shutdownGrace = 300 * time.Millisecond

// Certificate returns the serving certificate and the CA that the
// webhook configuration's caBundle needs: a generated one's, or CertDir's
// ca.crt if there is one (nil otherwise: whoever issued the certificate
// put its CA into the configuration).
func Certificate(o ServeOptions) (tls.Certificate, []byte, error) {
	if o.CertDir != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("webhook certificate: %w", err)
		}
		ca, err := os.ReadFile(filepath.Join(o.CertDir, "ca.crt"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return tls.Certificate{}, nil, err
		}
		return cert, ca, nil
	}
	sc, err := selfSignedCert(o.Hosts, time.Now())
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return sc.Cert, sc.CABundle, nil
}

// WebhookConfiguration is config/knative's MutatingWebhookConfiguration,
// with clientConfig.url instead of the Service when url is set, and the CA.
func WebhookConfiguration(url string, caBundle []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	doc, _, _ := bytes.Cut(knative.Webhook, []byte("\n---\n"))
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(doc, cfg); err != nil {
		return nil, fmt.Errorf("config/knative/webhook.yaml: %w", err)
	}
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		if url != "" {
			cc.Service, cc.URL = nil, &url
		}
		cc.CABundle = caBundle
	}
	return cfg, nil
}

// Register makes the apiserver trust and find the webhook. With url it
// creates or replaces the configuration; without, it patches caBundle into
// the installed one (nothing to do for a certificate whose CA is unknown).
func Register(ctx context.Context, kube kubernetes.Interface, url string, caBundle []byte) error {
	api := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	want, err := WebhookConfiguration(url, caBundle)
	if err != nil {
		return err
	}
	if url == "" {
		if caBundle == nil {
			return nil
		}
		var ops []jsonPatchOp
		for i := range want.Webhooks {
			ops = append(ops, jsonPatchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: caBundle})
		}
		body, _ := json.Marshal(ops)
		if _, err := api.Patch(ctx, WebhookConfigurationName, types.JSONPatchType, body, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("put the webhook's CA into %s (apply config/knative first): %w", WebhookConfigurationName, err)
		}
		return nil
	}
	have, err := api.Get(ctx, WebhookConfigurationName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		want.ResourceVersion = have.ResourceVersion
		_, err = api.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write webhook configuration %s: %w", WebhookConfigurationName, err)
	}
	return nil
}
