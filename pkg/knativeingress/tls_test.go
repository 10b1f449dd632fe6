package knativeingress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"gantry.dev/gantry/pkg/e2etest"
)

// selfSigned makes a certificate for hosts and its key, in PEM, as a
// certificate manager would put them in a Secret.
func selfSigned(t *testing.T, hosts ...string) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), cert
}

// tlsSecret creates or replaces the TLS Secret name with a new
// certificate for hosts, and returns the certificate.
func (e *env) tlsSecret(t *testing.T, name string, hosts ...string) *x509.Certificate {
	t.Helper()
	crt, key, cert := selfSigned(t, hosts...)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	ctx := context.Background()
	if _, err := e.kube.CoreV1().Secrets(e.ns).Update(ctx, sec, metav1.UpdateOptions{}); err == nil {
		return cert
	}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cert
}

// startHTTPS runs the ingress with an HTTPS listener until the test ends.
func (e *env) startHTTPS(t *testing.T) *Server {
	t.Helper()
	return e.startListeners(t, time.Minute, Listeners{External: "127.0.0.1:0", Local: "127.0.0.1:0", HTTPS: "127.0.0.1:0"})
}

// httpsClient dials addr whatever the URL's host, trusts certs, and
// speaks HTTP/2 or HTTP/1.1; it follows no redirect.
func httpsClient(addr string, certs ...*x509.Certificate) *http.Client {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Client{Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{RootCAs: pool},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			}}}
}

// anyCert dials addr and accepts any certificate: it sees whether one
// is served at all.
func anyCert(addr string) *http.Client {
	c := httpsClient(addr)
	c.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	return c
}

// fetch GETs url (with Host host when set) and returns the response, its
// body and the echo when the answer is 200.
func fetch(t *testing.T, c *http.Client, url, host string) (*http.Response, string, echo, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", echo{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	var ec echo
	if err == nil && resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(body, &ec)
	}
	return resp, strings.TrimSpace(string(body)), ec, err
}

// waitReason waits until the Ingress's Ready is status with reason
// (any when ""), and returns its message.
func (e *env) waitReason(t *testing.T, name, status, reason string) string {
	t.Helper()
	var msg string
	e2etest.Eventually(t, "ingress "+name+" Ready "+status+" "+reason, func(ctx context.Context) (bool, error) {
		st, u, err := e.condition(ctx, name, "Ready")
		if err != nil || st != status {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" {
				msg, _ = m["message"].(string)
				return reason == "" || m["reason"] == reason, nil
			}
		}
		return false, nil
	})
	return msg
}

// TestIngressServesTLSBySNIAndRotatesSecrets: the HTTPS listener picks
// each host's certificate from its Ingress's Secret by SNI, speaks HTTP/2
// to clients, serves a rotated Secret's certificate without a restart,
// and serves no certificate for a host whose Secret is missing or bad:
// that Ingress is not Ready, with the reason.
func TestIngressServesTLSBySNIAndRotatesSecrets(t *testing.T) {
	e := setup(t)
	s := e.startHTTPS(t)
	hostA, hostB := e.host("sni-a"), e.host("sni-b")
	certA := e.tlsSecret(t, "cert-a", hostA)
	certB := e.tlsSecret(t, "cert-b", hostB)
	e.create(t, "sni", Class, Spec{
		Rules: []Rule{rule(ExternalIP, []string{hostA}, Path{Splits: []Split{to("a", 0, nil)}}),
			rule(ExternalIP, []string{hostB}, Path{Splits: []Split{to("a-h2c", 0, nil)}})},
		// No secretNamespace: the Ingress's own.
		TLS: []TLS{{Hosts: []string{hostA}, SecretName: "cert-a", SecretNamespace: e.ns}, {Hosts: []string{hostB}, SecretName: "cert-b"}}})
	e.waitReady(t, "sni")

	c := httpsClient(s.HTTPSAddr(), certA, certB)
	for _, x := range []struct {
		host, proto string
		cert        *x509.Certificate
	}{{hostA, "HTTP/1.1", certA}, {hostB, "HTTP/2.0", certB}} {
		resp, body, ec, err := fetch(t, c, "https://"+x.host+"/p", "")
		if err != nil {
			t.Fatalf("https://%s: %v", x.host, err)
		}
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || ec.Proto != x.proto || ec.Headers.Get("X-Forwarded-Proto") != "https" {
			t.Errorf("https://%s: %d over %s, backend got %s with X-Forwarded-Proto %q (%s); want 200 over HTTP/2.0, %s and https",
				x.host, resp.StatusCode, resp.Proto, ec.Proto, ec.Headers.Get("X-Forwarded-Proto"), body, x.proto)
		}
		if got := resp.TLS.PeerCertificates[0].SerialNumber; got.Cmp(x.cert.SerialNumber) != 0 {
			t.Errorf("https://%s: served certificate %v, want %v", x.host, got, x.cert.SerialNumber)
		}
	}
	// Plain HTTP still serves (httpOption unset is Enabled).
	if code, ec, body := get(t, &http.Client{Timeout: time.Minute}, s.ExternalAddr(), hostA, "/", nil); code != 200 || ec.Name != "a" {
		t.Errorf("http://%s: %d from %q (%s), want 200 from a", hostA, code, ec.Name, body)
	}
	// A host other than the connection's server name: 421.
	if resp, body, _, err := fetch(t, c, "https://"+hostA+"/", hostB); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("SNI %s, Host %s: %v %v (%s), want 421", hostA, hostB, resp, err, body)
	}
	// No certificate for a name no Ingress has one for.
	if _, _, _, err := fetch(t, anyCert(s.HTTPSAddr()), "https://"+e.host("nobody")+"/", ""); err == nil {
		t.Errorf("https for a host without a certificate: the handshake succeeded")
	}

	// Rotation: a new key pair in the Secret is served on new connections.
	rotated := e.tlsSecret(t, "cert-a", hostA)
	e2etest.Eventually(t, "the rotated certificate served", func(context.Context) (bool, error) {
		c := httpsClient(s.HTTPSAddr(), rotated)
		resp, _, _, err := fetch(t, c, "https://"+hostA+"/", "")
		c.CloseIdleConnections()
		return err == nil && resp.StatusCode == 200, nil
	})

	// A missing Secret: not Ready with the reason, no certificate served.
	e.create(t, "missing", Class, Spec{Rules: []Rule{rule(ExternalIP, []string{e.host("missing")}, Path{Splits: []Split{to("a", 0, nil)}})},
		TLS: []TLS{{Hosts: []string{e.host("missing")}, SecretName: "later", SecretNamespace: e.ns}}})
	if msg := e.waitReason(t, "missing", "False", ReasonSecretMissing); !strings.Contains(msg, e.ns+"/later") {
		t.Errorf("missing secret: message %q does not name it", msg)
	}
	if _, _, _, err := fetch(t, anyCert(s.HTTPSAddr()), "https://"+e.host("missing")+"/", ""); err == nil {
		t.Errorf("https with the secret missing: the handshake succeeded")
	}
	// ... until it is created: the Secret is watched.
	later := e.tlsSecret(t, "later", e.host("missing"))
	e.waitReady(t, "missing")
	if resp, body, _, err := fetch(t, httpsClient(s.HTTPSAddr(), later), "https://"+e.host("missing")+"/", ""); err != nil || resp.StatusCode != 200 {
		t.Errorf("https once the secret exists: %v %v (%s)", resp, err, body)
	}

	// A Secret whose certificate does not name the host: not Ready.
	e.tlsSecret(t, "later", e.host("elsewhere"))
	if msg := e.waitReason(t, "missing", "False", ReasonSecretInvalid); !strings.Contains(msg, e.host("missing")) {
		t.Errorf("bad secret: message %q does not name the host", msg)
	}
	// Deleted: not Ready, and its certificate is no longer served.
	if err := e.kube.CoreV1().Secrets(e.ns).Delete(context.Background(), "cert-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitReason(t, "sni", "False", ReasonSecretMissing)
	if _, _, _, err := fetch(t, anyCert(s.HTTPSAddr()), "https://"+hostB+"/", ""); err == nil {
		t.Errorf("https with the secret deleted: the handshake succeeded")
	}
}

// TestIngressRedirectsToHTTPS: httpOption Redirected answers plain HTTP on
// the external listener with 301 to the same URL over HTTPS; Enabled
// serves it; the cluster-local listener never redirects.
func TestIngressRedirectsToHTTPS(t *testing.T) {
	e := setup(t)
	s := e.startHTTPS(t)
	spec := func(name, option string) Spec {
		return Spec{HTTPOption: option, Rules: []Rule{rule(ExternalIP, []string{e.host(name)}, Path{Splits: []Split{to("a", 0, nil)}})},
			TLS: []TLS{{SecretName: name, SecretNamespace: e.ns}}} // no hosts: the rules'
	}
	certR := e.tlsSecret(t, "redirected", e.host("redirected"))
	certE := e.tlsSecret(t, "enabled", e.host("enabled"))
	e.create(t, "redirected", Class, spec("redirected", HTTPOptionRedirected))
	e.create(t, "enabled", Class, spec("enabled", HTTPOptionEnabled))
	e.waitReady(t, "redirected")
	e.waitReady(t, "enabled")

	plain := httpsClient(s.ExternalAddr())
	resp, body, _, err := fetch(t, plain, "http://"+e.host("redirected")+"/p/q?x=1", "")
	_, port, _ := net.SplitHostPort(s.HTTPSAddr())
	want := "https://" + e.host("redirected") + ":" + port + "/p/q?x=1"
	if err != nil || resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != want {
		t.Fatalf("Redirected over http: %v %v (%s), want 301 to %s", resp, err, body, want)
	}
	if resp, body, ec, err := fetch(t, httpsClient(s.HTTPSAddr(), certR), want, ""); err != nil || resp.StatusCode != 200 || ec.Path != "/p/q" {
		t.Errorf("the redirect's target: %v %v (%s)", resp, err, body)
	}
	if code, ec, body := get(t, &http.Client{Timeout: time.Minute}, s.LocalAddr(), e.host("redirected"), "/", nil); code != 200 || ec.Name != "a" {
		t.Errorf("Redirected on the cluster-local listener: %d (%s), want 200", code, body)
	}
	if resp, body, ec, err := fetch(t, plain, "http://"+e.host("enabled")+"/", ""); err != nil || resp.StatusCode != 200 || ec.Name != "a" {
		t.Errorf("Enabled over http: %v %v (%s), want 200", resp, err, body)
	}
	if resp, body, _, err := fetch(t, httpsClient(s.HTTPSAddr(), certE), "https://"+e.host("enabled")+"/", ""); err != nil || resp.StatusCode != 200 {
		t.Errorf("Enabled over https: %v %v (%s), want 200", resp, err, body)
	}
}
