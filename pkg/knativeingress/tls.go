package knativeingress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// The reasons an Ingress's status gives when it is not routed.
const (
	// ReasonNotSupported: the spec asks for something this ingress does
	// not do (or is malformed).
	ReasonNotSupported = "NotSupported"
	// ReasonSecretMissing: a spec.tls entry names a Secret of type
	// kubernetes.io/tls that does not exist.
	ReasonSecretMissing = "TLSSecretMissing"
	// ReasonSecretInvalid: the Secret exists but holds no usable key pair
	// for the entry's hosts.
	ReasonSecretInvalid = "TLSSecretInvalid"
)

// notReady is why an Ingress is not routed, with the reason its status
// gives; other errors give ReasonNotSupported.
type notReady struct {
	reason string
	err    error
}

func (e *notReady) Error() string { return e.err.Error() }
func (e *notReady) Unwrap() error { return e.err }

// reasonOf is the status reason for err.
func reasonOf(err error) string {
	if nr, ok := errors.AsType[*notReady](err); ok {
		return nr.reason
	}
	return ReasonNotSupported
}

// certSource gives the key pair of a Secret of type kubernetes.io/tls;
// its errors are *notReady with ReasonSecretMissing or
// ReasonSecretInvalid.
type certSource interface {
	certificate(namespace, name string) (*tls.Certificate, error)
}

// secretCerts reads key pairs from the Secret informer's cache and keeps
// them parsed by resourceVersion, so a sync parses only what changed: a
// rotated Secret has a new resourceVersion and is parsed again.
type secretCerts struct {
	secrets corelisters.SecretLister
	// parsed and used are touched by the controller's sync only, which
	// runs on one goroutine: no lock.
	parsed map[string]parsedCert
	used   map[string]bool
}

type parsedCert struct {
	version string
	cert    *tls.Certificate
	err     error
}

func newSecretCerts(l corelisters.SecretLister) *secretCerts {
	return &secretCerts{secrets: l, parsed: map[string]parsedCert{}, used: map[string]bool{}}
}

func (s *secretCerts) certificate(namespace, name string) (*tls.Certificate, error) {
	key := namespace + "/" + name
	s.used[key] = true
	sec, err := s.secrets.Secrets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, &notReady{ReasonSecretMissing, fmt.Errorf("secret %s: not found (or not of type %s)", key, corev1.SecretTypeTLS)}
	}
	if err != nil {
		return nil, &notReady{ReasonSecretMissing, fmt.Errorf("secret %s: %w", key, err)}
	}
	if p, ok := s.parsed[key]; ok && p.version == sec.ResourceVersion {
		return p.cert, p.err
	}
	cert, err := keyPair(sec)
	if err != nil {
		err = &notReady{ReasonSecretInvalid, fmt.Errorf("secret %s: %w", key, err)}
	}
	s.parsed[key] = parsedCert{version: sec.ResourceVersion, cert: cert, err: err}
	return cert, err
}

// forget drops the parsed Secrets that the last sync did not use.
func (s *secretCerts) forget() {
	for key := range s.parsed {
		if !s.used[key] {
			delete(s.parsed, key)
		}
	}
	clear(s.used)
}

// keyPair parses a Secret's tls.crt and tls.key.
func keyPair(sec *corev1.Secret) (*tls.Certificate, error) {
	crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("want both %s and %s", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	if cert.Leaf == nil { // GODEBUG x509keypairleaf=0 leaves it out
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &cert, nil
}

// compileTLS resolves an Ingress's spec.tls into certificates by host.
// TLS is served on the external HTTPS listener, so each entry's hosts
// must be hosts of the Ingress's ExternalIP rules (extHosts; any host
// when anyHost, a rule without hosts); an entry without hosts takes them
// all (the "wildcard host setting" Knative's API leaves to the ingress).
// The Secret is in secretNamespace, else in the Ingress's namespace, and
// its certificate must be valid for every host of the entry. The first
// entry naming a host wins.
func compileTLS(ing *Ingress, extHosts []string, anyHost bool, certs certSource) (map[string]*tls.Certificate, error) {
	if len(ing.Spec.TLS) == 0 {
		return nil, nil
	}
	if certs == nil {
		return nil, errors.New("spec.tls: this ingress has no HTTPS listener (gantry serve --knative-ingress-https-addr)")
	}
	if len(ing.Spec.TLS) > maxRules {
		return nil, fmt.Errorf("spec.tls: %d entries, at most %d", len(ing.Spec.TLS), maxRules)
	}
	out := map[string]*tls.Certificate{}
	for i, e := range ing.Spec.TLS {
		hosts, err := tlsHosts(e.Hosts, extHosts, anyHost)
		if err != nil {
			return nil, fmt.Errorf("spec.tls[%d]: %w", i, err)
		}
		if errs := validation.IsDNS1123Subdomain(e.SecretName); len(errs) > 0 {
			return nil, fmt.Errorf("spec.tls[%d].secretName %q: %s", i, e.SecretName, strings.Join(errs, "; "))
		}
		ns := e.SecretNamespace
		if ns == "" {
			ns = ing.Namespace
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("spec.tls[%d].secretNamespace %q: %s", i, ns, strings.Join(errs, "; "))
		}
		cert, err := certs.certificate(ns, e.SecretName)
		if err != nil {
			return nil, fmt.Errorf("spec.tls[%d]: %w", i, err)
		}
		for _, h := range hosts {
			if err := cert.Leaf.VerifyHostname(h); err != nil {
				return nil, &notReady{ReasonSecretInvalid, fmt.Errorf("spec.tls[%d]: secret %s/%s: %w", i, ns, e.SecretName, err)}
			}
			if _, ok := out[h]; !ok {
				out[h] = cert
			}
		}
	}
	return out, nil
}

// tlsHosts checks an entry's hosts against the ExternalIP rules' hosts,
// lower case; none means all of those.
func tlsHosts(hosts, extHosts []string, anyHost bool) ([]string, error) {
	if len(hosts) == 0 {
		if len(extHosts) == 0 {
			return nil, errors.New("hosts: none given, and no ExternalIP rule names a host")
		}
		return extHosts, nil
	}
	if len(hosts) > maxHosts {
		return nil, fmt.Errorf("hosts: %d, at most %d", len(hosts), maxHosts)
	}
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		h = strings.ToLower(h)
		if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
			return nil, fmt.Errorf("host %q: %s", h, strings.Join(errs, "; "))
		}
		if !anyHost && !slices.Contains(extHosts, h) {
			return nil, fmt.Errorf("host %s is not a host of this Ingress's ExternalIP rules (TLS is served to external clients only)", h)
		}
		out = append(out, h)
	}
	return out, nil
}
