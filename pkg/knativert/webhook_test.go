package knativert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// revisions is a table of Revisions for the webhook's lookup; the cluster
// tests run it against the real apiserver.
func revisions(table map[string]revisionInfo, err error) revisionGetter {
	return func(_ context.Context, ns, name string) (revisionInfo, bool, error) {
		if err != nil {
			return revisionInfo{}, false, err
		}
		info, ok := table[ns+"/"+name]
		return info, ok, nil
	}
}

func review(t *testing.T, resource, op string, obj map[string]any) []byte {
	t.Helper()
	raw, _ := json.Marshal(obj)
	group := "apps"
	if resource == "podautoscalers" {
		group = PodAutoscalerGVR.Group
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("req-1"), Namespace: "ns", Operation: admissionv1.Operation(op),
			Resource: metav1.GroupVersionResource{Group: group, Resource: resource}, Object: runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// rts is a table of RTResources' controller UIDs.
func rts(table map[string]string) ownerGetter {
	return func(_ context.Context, ns, name string) (string, bool, error) {
		uid, ok := table[ns+"/"+name]
		return uid, ok, nil
	}
}

func post(t *testing.T, h http.Handler, body []byte, contentType string) (*http.Response, *admissionv1.AdmissionResponse) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp, out.Response
}

func owned(uid string) []any {
	return []any{map[string]any{"apiVersion": "serving.knative.dev/v1", "kind": "Revision", "name": "fn", "uid": uid, "controller": true}}
}

func TestWebhookRefusesMalformedRequests(t *testing.T) {
	w := &Webhook{revisions: revisions(nil, nil), rtOwner: rts(nil), log: slog.New(slog.DiscardHandler)}
	for name, c := range map[string]struct {
		method, ctype string
		body          []byte
		want          int
	}{
		"GET":          {http.MethodGet, "application/json", nil, http.StatusMethodNotAllowed},
		"not JSON":     {http.MethodPost, "text/plain", []byte("{}"), http.StatusUnsupportedMediaType},
		"bad JSON":     {http.MethodPost, "application/json", []byte("{"), http.StatusBadRequest},
		"no request":   {http.MethodPost, "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1"}`), http.StatusBadRequest},
		"over the cap": {http.MethodPost, "application/json", bytes.Repeat([]byte(" "), maxReviewBytes+1), http.StatusRequestEntityTooLarge},
	} {
		req := httptest.NewRequest(c.method, WebhookPath, bytes.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: status %d, want %d (%s)", name, rec.Code, c.want, rec.Body)
		}
	}
}

// The patches are what the apiserver applies: the cluster tests check
// the stored objects; here, the cases it does not reach.
func TestWebhookDecisions(t *testing.T) {
	critical := map[string]revisionInfo{"ns/fn": {UID: "u1", Annotations: map[string]string{"autoscaling.knative.dev/application-criticality-level": "x"}}}
	pa := func(uid string, ref map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "fn", "ownerReferences": owned(uid)}, "spec": map[string]any{"scaleTargetRef": ref}}
	}
	dep := map[string]any{"metadata": map[string]any{"name": "fn-deployment", "ownerReferences": owned("u1"),
		"annotations": map[string]any{"a": "b"}}, "spec": map[string]any{"replicas": 3}}
	rt := map[string]any{"apiVersion": "gantry.dev/v1alpha1", "kind": "RTResource", "name": "fn"}
	for name, c := range map[string]struct {
		revs    map[string]revisionInfo
		rts     map[string]string
		lookErr error
		body    []byte
		allowed bool
		patch   string
	}{
		"malformed criticality still critical": {critical, nil, nil, review(t, "podautoscalers", "CREATE", pa("u1", map[string]any{"kind": "Deployment"})), true,
			`[{"op":"add","path":"/spec/scaleTargetRef","value":{"apiVersion":"gantry.dev/v1alpha1","kind":"RTResource","name":"fn"}}]`},
		"already the RTResource":          {critical, map[string]string{"ns/fn": "u1"}, nil, review(t, "podautoscalers", "UPDATE", pa("u1", rt)), true, ""},
		"another incarnation of the name": {critical, nil, nil, review(t, "podautoscalers", "CREATE", pa("u0", map[string]any{"kind": "Deployment"})), true, ""},
		"Revision gone":                   {nil, nil, nil, review(t, "podautoscalers", "CREATE", pa("u1", map[string]any{"kind": "Deployment"})), true, ""},
		"Revision unreadable":             {nil, nil, errors.New("etcd down"), review(t, "podautoscalers", "CREATE", pa("u1", nil)), false, ""},
		"someone else's RTResource":       {critical, map[string]string{"ns/fn": "other"}, nil, review(t, "podautoscalers", "CREATE", pa("u1", nil)), false, ""},
		"Deployment with annotations": {critical, nil, nil, review(t, "deployments", "CREATE", dep), true,
			`[{"op":"add","path":"/spec/replicas","value":0},{"op":"add","path":"/metadata/annotations/gantry.dev~1knative-initial-replicas","value":"3"}]`},
		"Deployment update": {critical, nil, nil, review(t, "deployments", "UPDATE", dep), true, ""},
	} {
		w := &Webhook{revisions: revisions(c.revs, c.lookErr), rtOwner: rts(c.rts), log: slog.New(slog.DiscardHandler)}
		_, resp := post(t, w, c.body, "application/json")
		if resp == nil {
			t.Fatalf("%s: no AdmissionResponse", name)
		}
		if resp.UID != "req-1" || resp.Allowed != c.allowed || string(resp.Patch) != c.patch {
			t.Errorf("%s: uid %s allowed %v patch %s, want req-1 %v %s", name, resp.UID, resp.Allowed, resp.Patch, c.allowed, c.patch)
		}
		if !c.allowed && (resp.Result == nil || !strings.Contains(resp.Result.Message, "etcd down") && !strings.Contains(resp.Result.Message, "not controlled by Revision fn")) {
			t.Errorf("%s: refusal %+v does not say why", name, resp.Result)
		}
	}
}

// The generated certificate is one a client that trusts only the CA
// bundle accepts for the host, as the apiserver does.
func TestSelfSignedCertVerifiesAgainstItsBundle(t *testing.T) {
	sc, err := selfSignedCert([]string{"127.0.0.1", "gantry-knative-webhook.gantry-system.svc"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{sc.Cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sc.CABundle) {
		t.Fatal("bundle holds no certificate")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("a client trusting the bundle: %v", err)
	}
	resp.Body.Close()
	other, _ := selfSignedCert([]string{"127.0.0.1"}, time.Now())
	pool2 := x509.NewCertPool()
	pool2.AppendCertsFromPEM(other.CABundle)
	client2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool2}}}
	if _, err := client2.Get(srv.URL); err == nil {
		t.Error("a client trusting another CA accepted the certificate")
	}
	if _, err := selfSignedCert(nil, time.Now()); err == nil {
		t.Error("a certificate with no host was made")
	}
}

func TestWebhookConfigurationTakesTheURLOrKeepsTheService(t *testing.T) {
	cfg, err := WebhookConfiguration("https://127.0.0.1:8443/mutate", []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	cc := cfg.Webhooks[0].ClientConfig
	if cfg.Name != WebhookConfigurationName || cc.Service != nil || *cc.URL != "https://127.0.0.1:8443/mutate" || string(cc.CABundle) != "CA" {
		t.Errorf("with a URL: %s %+v", cfg.Name, cc)
	}
	cfg, err = WebhookConfiguration("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Webhooks[0].ClientConfig.Service; s == nil || s.Name != "gantry-knative-webhook" || *s.Path != WebhookPath {
		t.Errorf("without a URL: %+v", cfg.Webhooks[0].ClientConfig)
	}
	for _, bad := range []string{"http://h/mutate", "https:///x", "https://h/m?q=1", "https://u@h/m"} {
		if ValidateURL(bad) == nil {
			t.Errorf("ValidateURL(%q) = nil", bad)
		}
	}
	if err := ValidateURL("https://127.0.0.1:8443/mutate"); err != nil {
		t.Error(err)
	}
}
