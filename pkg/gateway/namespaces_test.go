package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/stack"
)

// call sends one request to an in-process gateway.
func call(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// Two functions of one name in two namespaces are two functions: each
// answers at its own NAME.NAMESPACE, is listed in its own namespace only,
// and is removed alone; NAME and NAME.openfaas-fn are one.
func TestNamespacesKeepSameNamedFunctionsApart(t *testing.T) {
	g, _ := inprocGateway(t)
	mustCode := func(want int, method, path, body string) string {
		t.Helper()
		code, out := call(t, g, method, path, body)
		if code != want {
			t.Fatalf("%s %s: %d %q, want %d", method, path, code, out, want)
		}
		return out
	}
	if _, out := call(t, g, "POST", "/system/functions", `{"service":"f","envProcess":"x","namespace":"staging"}`); !strings.Contains(out, "faas-cli namespace create staging") {
		t.Fatalf("deploy into a namespace nobody created: %q", out)
	}
	mustCode(201, "POST", "/system/namespace/", `{"name":"staging","labels":{"team":"a"}}`)
	mustCode(409, "POST", "/system/namespace/staging", `{}`)
	mustCode(400, "POST", "/system/namespace/", `{"name":"Bad_NS"}`)
	// A label no Kubernetes namespace could carry is refused, not kept.
	mustCode(400, "POST", "/system/namespace/", `{"name":"blank","labels":{"":"x"}}`)
	mustCode(202, "POST", "/system/functions", `{"service":"f","envProcess":"x","namespace":"staging"}`)
	mustCode(202, "POST", "/system/functions", `{"service":"f","envProcess":"x"}`)
	mustCode(409, "POST", "/system/functions", `{"service":"f","envProcess":"x","namespace":"openfaas-fn"}`)

	var ns []string
	_ = json.Unmarshal([]byte(mustCode(200, "GET", "/system/namespaces", "")), &ns)
	if !slices.Equal(ns, []string{"openfaas-fn", "staging"}) {
		t.Fatalf("namespaces %v", ns)
	}
	var got functionNamespace
	_ = json.Unmarshal([]byte(mustCode(200, "GET", "/system/namespace/staging", "")), &got)
	if got.Name != "staging" || got.Labels["team"] != "a" {
		t.Fatalf("namespace staging: %+v", got)
	}
	mustCode(200, "GET", "/system/namespace/openfaas-fn", "")
	mustCode(404, "GET", "/system/namespace/nope", "")
	mustCode(202, "PUT", "/system/namespace/staging", `{"name":"staging","annotations":{"owner":"b"}}`)
	got = functionNamespace{}
	_ = json.Unmarshal([]byte(mustCode(200, "GET", "/system/namespace/staging", "")), &got)
	if got.Annotations["owner"] != "b" || got.Labels != nil {
		t.Fatalf("after update: %+v", got)
	}

	for path, want := range map[string]string{"/function/f.staging": "ok", "/function/f": "ok", "/function/f.openfaas-fn": "ok"} {
		if out := mustCode(200, "POST", path, "x"); out != want {
			t.Fatalf("%s: %q", path, out)
		}
	}
	mustCode(404, "POST", "/function/f.prod", "x")
	listed := func(query string) []string {
		var l []functionStatus
		_ = json.Unmarshal([]byte(mustCode(200, "GET", "/system/functions"+query, "")), &l)
		var out []string
		for _, s := range l {
			out = append(out, s.Name+"."+s.Namespace)
		}
		return out
	}
	if a, b := listed(""), listed("?namespace=staging"); !slices.Equal(a, []string{"f.openfaas-fn"}) || !slices.Equal(b, []string{"f.staging"}) {
		t.Fatalf("default namespace lists %v, staging %v", a, b)
	}
	mustCode(404, "GET", "/system/functions?namespace=prod", "")
	mustCode(200, "GET", "/system/function/f?namespace=staging", "")
	mustCode(200, "GET", "/system/function/f.staging", "")
	mustCode(400, "GET", "/system/function/f.staging?namespace=prod", "")
	mustCode(202, "POST", "/system/scale-function/f?namespace=staging", `{"serviceName":"f","replicas":2,"namespace":"staging"}`)

	mustCode(409, "DELETE", "/system/namespace/staging", "")
	mustCode(400, "DELETE", "/system/namespace/openfaas-fn", "")
	mustCode(202, "DELETE", "/system/functions", `{"functionName":"f","namespace":"staging"}`)
	mustCode(404, "POST", "/function/f.staging", "x")
	mustCode(200, "POST", "/function/f", "x")
	mustCode(202, "DELETE", "/system/namespace/staging", "")
	mustCode(404, "DELETE", "/system/namespace/staging", "")
}

// Every field of a deployment comes back from describe as it was sent,
// so faas-cli diff finds nothing; a field the request format does not have
// is refused, not dropped. (The in-process backend takes every field: what
// a real backend refuses is TestLocalRuntimeRefusesWhatItCannotHonour's.)
func TestDeploymentFieldsRoundTrip(t *testing.T) {
	g, _ := inprocGateway(t)
	dep := deployment{Service: "full", Image: "example/full:1", EnvProcess: "cat",
		EnvVars: map[string]string{"A": "1"}, Constraints: []string{"node.platform.os == linux"},
		Secrets: []string{"db-password"}, Labels: map[string]string{"team": "x", "com.openfaas.scale.max": "3"},
		Annotations: map[string]string{"gantry.dev/slo": "250ms", "note": "y"},
		Limits:      &resources{Resources: stackResources("128Mi", "500m")},
		Requests:    &resources{Resources: stackResources("64Mi", "100m")}, ReadOnly: true}
	body, _ := json.Marshal(dep)
	if code, out := call(t, g, "POST", "/system/functions", string(body)); code != 202 {
		t.Fatalf("deploy: %d %s", code, out)
	}
	code, out := call(t, g, "GET", "/system/function/full", "")
	var st functionStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 200 {
		t.Fatalf("describe: %d %s", code, out)
	}
	back := deployment{Service: st.Name, Image: st.Image, EnvProcess: st.EnvProcess, EnvVars: st.EnvVars,
		Constraints: st.Constraints, Secrets: st.Secrets, Labels: st.Labels, Annotations: st.Annotations,
		Limits: st.Limits, Requests: st.Requests, ReadOnly: st.ReadOnlyRootFilesystem}
	if !reflect.DeepEqual(back, dep) || st.Namespace != "openfaas-fn" || st.CreatedAt.IsZero() {
		t.Fatalf("described\n%+v\nwant\n%+v", st, dep)
	}
	for _, bad := range []string{
		`{"service":"u","envProcess":"x","unknownField":1}`,
		`{"service":"u","envProcess":"x","limits":{"memory":"lots"}}`,
		`{"service":"u","envProcess":"x","limits":{"nvidia.com/gpu":"1"}}`,
		`{"service":"u","envProcess":"x","limits":{"disk":"1Gi"}}`,
	} {
		if code, out := call(t, g, "POST", "/system/functions", bad); code != 400 || strings.TrimSpace(out) == "" {
			t.Errorf("%s: %d %q, want 400 with a reason", bad, code, out)
		}
	}
}

// No route answers with Go's bare "404 page not found".
func TestUnknownRoutesSayWhy(t *testing.T) {
	g, _ := inprocGateway(t)
	for _, path := range []string{"/nothing", "/system/nothing"} {
		code, out := call(t, g, "GET", path, "")
		if code != 404 || !strings.Contains(out, "no route") || strings.Contains(out, "404 page not found") {
			t.Errorf("%s: %d %q", path, code, out)
		}
	}
	// A served path asked with another method is a 405 naming the
	// methods it takes, as HTTP has it (it was a 404 "no route").
	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/system/info", "GET"},
		{"PATCH", "/system/functions", "GET, POST, PUT, DELETE"},
		{"PUT", "/system/scale-function/f", "POST"},
	} {
		code, out := call(t, g, c.method, c.path, "")
		if code != 405 || !strings.Contains(out, "it takes "+c.allow) {
			t.Errorf("%s %s: %d %q, want 405 naming %s", c.method, c.path, code, out, c.allow)
		}
	}
	if code, out := call(t, g, "GET", "/async-function/f", ""); code != 405 || !strings.Contains(out, "POST") {
		t.Errorf("GET /async-function/f: %d %q, want 405 naming the method", code, out)
	}
}

func stackResources(memory, cpu string) stack.Resources {
	return stack.Resources{Memory: memory, CPU: cpu}
}
