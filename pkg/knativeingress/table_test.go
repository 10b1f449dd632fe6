package knativeingress

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func backend(name string, port intstr.IntOrString) Backend {
	return Backend{ServiceNamespace: "ns", ServiceName: name, ServicePort: port}
}

// TestHashIsKnativesComputeHash: the hash a probe gets is the one
// Knative's ingress.ComputeHash (knative.dev/networking at
// NetworkingVersion) gives for the same Ingress, computed with that
// module for this spec.
func TestHashIsKnativesComputeHash(t *testing.T) {
	ing := &Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hello"}, Spec: Spec{
		HTTPOption: "Enabled",
		Rules: []Rule{{
			Hosts: []string{"hello.ns.example.com"}, Visibility: ExternalIP,
			HTTP: &RuleHTTP{Paths: []Path{{
				Path: "/p", RewriteHost: "x.ns.svc.cluster.local",
				Headers:       map[string]HeaderMatch{"X-B": {Exact: "2"}, "X-A": {Exact: "1"}},
				AppendHeaders: map[string]string{"Knative-Serving-Namespace": "ns"},
				Splits: []Split{
					{Backend: backend("hello-00001", intstr.FromInt(80)), Percent: 60, AppendHeaders: map[string]string{"Knative-Serving-Revision": "hello-00001"}},
					{Backend: backend("hello-00002", intstr.FromString("http")), Percent: 40},
				},
			}}},
		}, {
			Hosts: []string{"hello.ns.svc.cluster.local"}, Visibility: ClusterLocal,
			HTTP: &RuleHTTP{Paths: []Path{{Splits: []Split{{Backend: backend("hello-00001", intstr.FromInt(80))}}}}},
		}},
	}}
	got, err := Hash(ing)
	if err != nil {
		t.Fatal(err)
	}
	if want := "31b9e804700c31d0a49b2dd05614656916e0f9319226e404e48569021a12a4ab"; got != want {
		t.Errorf("Hash = %s, want Knative's %s", got, want)
	}
}

func one(path string, splits ...Split) Spec {
	return Spec{Rules: []Rule{{Hosts: []string{"h.example.com"}, HTTP: &RuleHTTP{Paths: []Path{{Path: path, Splits: splits}}}}}}
}

func TestTableRefusesWhatItCannotServe(t *testing.T) {
	ok := Split{Backend: backend("s", intstr.FromInt(80))}
	cases := map[string]struct {
		spec Spec
		want string
	}{
		"tls without https":   {Spec{TLS: []TLS{{Hosts: []string{"h.example.com"}, SecretName: "s"}}, Rules: one("", ok).Rules}, "no HTTPS listener"},
		"redirect sans https": {Spec{HTTPOption: HTTPOptionRedirected, Rules: one("", ok).Rules}, "no HTTPS listener"},
		"bad httpOption":      {Spec{HTTPOption: "Sometimes", Rules: one("", ok).Rules}, "httpOption"},
		"no rules":            {Spec{}, "spec.rules"},
		"no http":             {Spec{Rules: []Rule{{Hosts: []string{"h"}}}}, "no http paths"},
		"bad visibility":      {Spec{Rules: []Rule{{Visibility: "Mesh", HTTP: one("", ok).Rules[0].HTTP}}}, "visibility"},
		"bad host":            {Spec{Rules: []Rule{{Hosts: []string{"not a host"}, HTTP: one("", ok).Rules[0].HTTP}}}, "host"},
		"relative path":       {one("p", ok), "must begin with /"},
		"no splits":           {one(""), "splits: none"},
		"percents short":      {one("", Split{Backend: ok.Backend, Percent: 50}, Split{Backend: ok.Backend, Percent: 40}), "add up to 90"},
		"percent negative":    {one("", Split{Backend: ok.Backend, Percent: -10}, Split{Backend: ok.Backend, Percent: 110}), "want 0 to 100"},
		"no port":             {one("", Split{Backend: backend("s", intstr.FromInt(0))}), "servicePort"},
		"no service":          {one("", Split{Backend: backend("", intstr.FromInt(80))}), "serviceName"},
		"bad header name":     {Spec{Rules: []Rule{{HTTP: &RuleHTTP{Paths: []Path{{AppendHeaders: map[string]string{"a b": "x"}, Splits: []Split{ok}}}}}}}, "appendHeaders"},
		"header value breaks": {Spec{Rules: []Rule{{HTTP: &RuleHTTP{Paths: []Path{{AppendHeaders: map[string]string{"X-A": "x\r\nY: z"}, Splits: []Split{ok}}}}}}}, "line break"},
		"bad rewrite":         {Spec{Rules: []Rule{{HTTP: &RuleHTTP{Paths: []Path{{RewriteHost: "a/b", Splits: []Split{ok}}}}}}}, "rewriteHost"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tb := newTable()
			err := tb.add(&Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i"}, Spec: c.spec}, DefaultClusterDomain, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
			if len(tb.external.byHost)+len(tb.local.byHost)+len(tb.external.any)+len(tb.local.any) != 0 {
				t.Errorf("a refused Ingress left routes")
			}
		})
	}
}

func TestTableMatchesFirstPathOfTheHostThenHostlessRules(t *testing.T) {
	s := func(name string) []Split { return []Split{{Backend: backend(name, intstr.FromInt(80))}} }
	ing := &Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i"}, Spec: Spec{Rules: []Rule{
		{Hosts: []string{"H.example.com"}, HTTP: &RuleHTTP{Paths: []Path{
			{Path: "/a", Headers: map[string]HeaderMatch{"x-pick": {Exact: "1"}}, Splits: s("a1")},
			{Path: "/a", Splits: s("a")},
			{Splits: s("root")},
		}}},
		{Hosts: []string{"svc.ns.svc.cluster.local", "svc.123.svc.cluster.local"}, Visibility: ClusterLocal, HTTP: &RuleHTTP{Paths: []Path{{Splits: s("local")}}}},
		{HTTP: &RuleHTTP{Paths: []Path{{Path: "/any", Splits: s("any")}}}},
	}}}
	tb := newTable()
	if err := tb.add(ing, DefaultClusterDomain, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		local      bool
		host, path string
		h          string
		want       string
	}{
		{false, "h.example.com", "/a/b", "1", "a1"},
		{false, "h.example.com", "/a/b", "2", "a"},
		{false, "h.example.com", "/b", "", "root"},
		{false, "other.example.com", "/any/x", "", "any"},
		{false, "other.example.com", "/b", "", ""},
		{false, "svc.ns.svc.cluster.local", "/", "", ""},
		{true, "svc.ns.svc.cluster.local", "/", "", "local"},
		{true, "svc.ns.svc", "/", "", "local"},
		{true, "svc.ns", "/", "", "local"},
		// A short form whose last label is all digits is no host name.
		{true, "svc.123.svc", "/", "", "local"},
		{true, "svc.123", "/", "", ""},
		{true, "h.example.com", "/x", "", "root"},
	} {
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.h != "" {
			r.Header.Set("X-Pick", c.h)
		}
		routes := &tb.external
		if c.local {
			routes = &tb.local
		}
		got := ""
		if m := routes.match(c.host, r); m != nil {
			got = m.splits[0].backend.ServiceName
		}
		if got != c.want {
			t.Errorf("local=%v %s%s X-Pick=%q: routed to %q, want %q", c.local, c.host, c.path, c.h, got, c.want)
		}
	}
}

func TestHostOnly(t *testing.T) {
	for in, want := range map[string]string{"A.Example.com:8080": "a.example.com", "a.example.com.": "a.example.com", "[::1]:80": "::1", "x": "x"} {
		if got := hostOnly(in); got != want {
			t.Errorf("hostOnly(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDecodeRefusesUnknownSpecFields(t *testing.T) {
	obj := map[string]any{"metadata": map[string]any{"name": "i", "namespace": "ns"}, "status": map[string]any{"observedGeneration": int64(1)},
		"spec": map[string]any{"httpOption": "Enabled", "rules": []any{map[string]any{"hosts": []any{"h.example.com"},
			"http": map[string]any{"paths": []any{map[string]any{"splits": []any{}, "retries": map[string]any{"attempts": int64(3)}}}}}}}}
	if _, err := fromUnstructured(obj); err == nil || !strings.Contains(err.Error(), "retries") {
		t.Fatalf("an unknown spec field: err = %v, want one naming it", err)
	}
	delete(obj["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)["http"].(map[string]any)["paths"].([]any)[0].(map[string]any), "retries")
	ing, err := fromUnstructured(obj)
	if err != nil || ing.Name != "i" || ing.Spec.HTTPOption != HTTPOptionEnabled || len(ing.Spec.Rules) != 1 {
		t.Fatalf("a known spec: %+v, %v", ing, err)
	}
}
