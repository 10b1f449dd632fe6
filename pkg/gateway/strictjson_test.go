package gateway

import (
	"net/http"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/stack"
)

// Every management request's body is one JSON value with only the fields
// the request has: an unknown field, a second value or trailing bytes are
// a 400 naming what is wrong, and nothing changes. A field the gateway
// works out itself (an app's budgets) is refused rather than dropped.
func TestManagementBodiesRefuseUnknownFieldsAndTrailingData(t *testing.T) {
	srv, _ := startStateGateway(t, t.TempDir(), &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}})
	u := srv.URL()
	for _, c := range []struct {
		method, path, body, want string
	}{
		{http.MethodPost, "/system/scale-function/echo", `{"serviceName":"echo","replicas":2,"replica":3}`, `unknown field "replica"`},
		{http.MethodDelete, "/system/functions", `{"functionName":"echo","namesapce":"dev"}`, `unknown field "namesapce"`},
		{http.MethodPost, "/system/secrets", `{"name":"db","value":"x","vaule":"y"}`, `unknown field "vaule"`},
		{http.MethodPost, "/system/functions", `{"service":"two","envProcess":"cat"} trailing`, "invalid character"},
		{http.MethodPost, "/system/functions", `{"service":"two","envProcess":"cat"}{"service":"three"}`, "more data after the JSON value"},
		{http.MethodPost, "/system/namespace/", `{"name":"dev"}{}`, "more data after the JSON value"},
		{http.MethodPost, "/system/apps", `{"name":"chain","functions":["echo"],"budgets":["5s"]}`, "budgets are what the gateway derives"},
	} {
		code, body, _ := do(t, c.method, u+c.path, c.body, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s %s %s: %d %q, want 400 saying %q", c.method, c.path, c.body, code, body, c.want)
		}
	}
	for _, path := range []string{"/system/function/two", "/system/secrets", "/system/apps/chain", "/system/namespace/dev"} {
		code, body, _ := do(t, http.MethodGet, u+path, "", nil)
		if (path == "/system/secrets" && body != "[]\n" && body != "[]") || (path != "/system/secrets" && code != http.StatusNotFound) {
			t.Errorf("GET %s after the refusals: %d %q, want nothing created", path, code, body)
		}
	}
	if st, _ := srv.D.Function("echo"); st.Stats.Spawned != 0 {
		t.Errorf("a refused scale started %d instances", st.Stats.Spawned)
	}
	// Whitespace after the value is not data.
	if code, body, _ := do(t, http.MethodPost, u+"/system/scale-function/echo", "{\"serviceName\":\"echo\",\"replicas\":0}\n\t ", nil); code != http.StatusAccepted {
		t.Errorf("scale with a trailing newline: %d %q, want 202", code, body)
	}
}

// A query parameter a route does not take, a namespace given twice, or a
// query namespace that disagrees with the body's is refused, never
// answered as if absent; a query namespace alone is honoured.
func TestManagementQueriesAreHonouredOrRefused(t *testing.T) {
	srv, _ := startStateGateway(t, t.TempDir(), &stack.Stack{Functions: []stack.Function{instanceFunction(t, "echo", "echo")}})
	u := srv.URL()
	if code, body, _ := do(t, http.MethodPost, u+"/system/namespace/", `{"name":"dev"}`, nil); code != http.StatusCreated {
		t.Fatalf("create namespace dev: %d %q", code, body)
	}
	for _, c := range []struct {
		method, path, body, want string
	}{
		{http.MethodGet, "/system/functions?namesapce=dev", "", `unknown query parameter "namesapce"`},
		{http.MethodGet, "/system/function/echo?usage=1", "", `unknown query parameter "usage"`},
		{http.MethodGet, "/system/info?x=1", "", "takes none"},
		{http.MethodGet, "/system/functions?namespace=dev&namespace=openfaas-fn", "", "given 2 times"},
		{http.MethodPost, "/system/scale-function/echo?namespace=dev", `{"serviceName":"echo","replicas":1,"namespace":"openfaas-fn"}`, `the body names namespace "openfaas-fn", the query "dev"`},
		{http.MethodDelete, "/system/functions?namespace=dev", `{"functionName":"echo","namespace":"openfaas-fn"}`, "the body names namespace"},
		{http.MethodPost, "/system/functions?namespace=openfaas-fn", `{"service":"two","envProcess":"cat","namespace":"dev"}`, "the body names namespace"},
		{http.MethodGet, "/system/secrets?name=db", "", `unknown query parameter "name"`},
	} {
		code, body, _ := do(t, c.method, u+c.path, c.body, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s %s %s: %d %q, want 400 saying %q", c.method, c.path, c.body, code, body, c.want)
		}
	}
	if st, _ := srv.D.Function("echo"); st.Stats.Spawned != 0 || st.Replicas != 0 {
		t.Errorf("a refused scale started %d instances", st.Stats.Spawned)
	}
	if _, ok := srv.D.Function("two.dev"); ok {
		t.Error("a refused deploy created two.dev")
	}
	// A query namespace and a body without one: the query's, as the body's.
	if code, body, _ := do(t, http.MethodPost, u+"/system/functions?namespace=dev", `{"service":"three","envProcess":"cat"}`, nil); code != http.StatusAccepted {
		t.Fatalf("deploy with ?namespace=dev: %d %q", code, body)
	}
	if code, body, _ := do(t, http.MethodGet, u+"/system/function/three?namespace=dev", "", nil); code != http.StatusOK || !strings.Contains(body, `"namespace":"dev"`) {
		t.Fatalf("three in dev: %d %q", code, body)
	}
	if code, body, _ := do(t, http.MethodDelete, u+"/system/functions?namespace=dev", `{"functionName":"three"}`, nil); code != http.StatusAccepted {
		t.Fatalf("delete three with ?namespace=dev: %d %q", code, body)
	}
}
