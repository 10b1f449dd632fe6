package gateway

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gantry.dev/gantry/pkg/secrets"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

func TestSecretsAPIKeepsValuesPrivateAndHandsThemToInstances(t *testing.T) {
	dir := t.TempDir()
	srv, stop := startStateGateway(t, dir, nil)
	call := func(method, body string, want int, wantText string) string {
		t.Helper()
		code, got, _ := do(t, method, srv.URL()+"/system/secrets", body, nil)
		if code != want || !strings.Contains(got, wantText) {
			t.Fatalf("%s /system/secrets %s: %d %q, want %d containing %q", method, body, code, got, want, wantText)
		}
		return got
	}
	call("POST", `{"name":"db-password","value":"hunter2"}`, 202, "")
	call("POST", `{"name":"api-key","rawValue":"AAEC/w=="}`, 202, "") // bytes 0 1 2 255
	call("POST", `{"name":"db-password","value":"again"}`, 409, "exists")
	call("PUT", `{"name":"db-password","value":"s3cret"}`, 202, "")
	call("PUT", `{"name":"nobody","value":"x"}`, 404, "not found")
	call("POST", `{"name":"Bad_Name","value":"x"}`, 400, "lower-case")
	call("POST", `{"name":"empty"}`, 400, "required")
	call("POST", `{"name":"both","value":"a","rawValue":"Yg=="}`, 400, "not both")
	call("POST", `{"name":"other-ns","value":"a","namespace":"staging"}`, 400, "namespace")
	call("POST", `{"name":"huge","value":"`+strings.Repeat("x", secrets.MaxValue+1)+`"}`, 400, "at most 1048576")
	call("DELETE", `{"name":"nobody"}`, 404, "not found")
	list := call("GET", "", 200, "")
	if strings.Contains(list, "s3cret") || strings.Contains(list, "hunter2") || strings.Contains(list, "value") {
		t.Fatalf("the list shows values: %s", list)
	}
	var got []secretJSON
	if err := json.Unmarshal([]byte(list), &got); err != nil || len(got) != 2 || got[0].Name != "api-key" || got[1].Name != "db-password" || got[0].Namespace != stack.DefaultNamespace {
		t.Fatalf("list %s (%v)", list, err)
	}
	for _, name := range []string{"db-password", "api-key"} {
		st, err := os.Stat(filepath.Join(dir, statedir.Secrets, name))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s on disk: %v %v, want 0600", name, st, err)
		}
	}

	// A deployment naming a missing secret is refused; one naming
	// existing ones gets them in a private folder.
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions",
		deploymentJSON(t, "reader", "secret", map[string]any{"secrets": []string{"db-password", "missing"}}), nil); code != 400 || !strings.Contains(body, "missing") {
		t.Fatalf("deploy with a missing secret: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions",
		deploymentJSON(t, "reader", "secret", map[string]any{"secrets": []string{"db-password", "api-key"}}), nil); code != 202 {
		t.Fatalf("deploy: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/reader", "db-password", nil); code != 200 || body != "700:s3cret" {
		t.Fatalf("the instance read %d %q, want 700:s3cret", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/reader", "api-key", nil); code != 200 || body != "700:\x00\x01\x02\xff" {
		t.Fatalf("the instance read %d %q", code, body)
	}
	// An update reaches the running instance, as a pod's secret volume
	// is updated; before, it kept the value it started with.
	call("PUT", `{"name":"db-password","value":"rotated"}`, 202, "")
	if code, body, _ := do(t, "POST", srv.URL()+"/function/reader", "db-password", nil); code != 200 || body != "700:rotated" {
		t.Fatalf("after the update the instance read %d %q, want 700:rotated", code, body)
	}
	call("PUT", `{"name":"db-password","value":"s3cret"}`, 202, "")
	_, st := describe(t, srv, "reader")
	if strings.Join(st.Secrets, ",") != "db-password,api-key" {
		t.Fatalf("status secrets %v", st.Secrets)
	}
	stop()
	// The instances' copies go with them.
	if left, _ := filepath.Glob(filepath.Join(dir, statedir.Secrets, secrets.RunDir, "*")); len(left) != 0 {
		t.Fatalf("copies left after shutdown: %v", left)
	}

	// Secrets and the function that names them survive the restart; a
	// stack file may name secrets that exist, and not ones that do not.
	srv, stop = startStateGateway(t, dir, nil)
	if code, body, _ := do(t, "POST", srv.URL()+"/function/reader", "db-password", nil); code != 200 || body != "700:s3cret" {
		t.Fatalf("after restart: %d %q", code, body)
	}
	if code, body, _ := do(t, "DELETE", srv.URL()+"/system/secrets", `{"name":"api-key"}`, nil); code != 202 {
		t.Fatalf("delete: %d %q", code, body)
	}
	stop()
	named := instanceFunction(t, "stacked", "secret")
	named.Secrets = []string{"db-password"}
	srv, stop = startStateGateway(t, dir, &stack.Stack{Functions: []stack.Function{named}})
	if code, body, _ := do(t, "POST", srv.URL()+"/function/stacked", "db-password", nil); code != 200 || body != "700:s3cret" {
		t.Fatalf("stack function: %d %q", code, body)
	}
	stop()
	named.Secrets = []string{"api-key"}
	d, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := Start(t.Context(), ServerConfig{Addr: "127.0.0.1:0", State: d, Stack: &stack.Stack{Functions: []stack.Function{named}},
		Backend: newTestLocal(t)}); err == nil || !strings.Contains(err.Error(), "api-key") {
		t.Fatalf("a stack naming a deleted secret: %v", err)
	}
}

func TestSecretsWithoutAStateFolderAreRefusedPlainly(t *testing.T) {
	srv := startGateway(t, &stack.Stack{}, nil)
	if code, body, _ := do(t, "GET", srv.URL()+"/system/secrets", "", nil); code != 501 || !strings.Contains(body, "state folder") {
		t.Fatalf("%d %q", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions",
		deploymentJSON(t, "reader", "secret", map[string]any{"secrets": []string{"x"}}), nil); code != 400 || !strings.Contains(body, "state folder") {
		t.Fatalf("deploy naming secrets: %d %q", code, body)
	}
}

// A secret of the documented largest size can be created as a value or
// as base64 rawValue (the request's JSON is larger than the value); one
// byte more is refused naming the bound.
func TestSecretOfTheLargestSizeIsAccepted(t *testing.T) {
	srv, _ := startStateGateway(t, t.TempDir(), nil)
	value := strings.Repeat("s", secrets.MaxValue)
	raw, _ := json.Marshal(map[string]any{"name": "raw", "rawValue": []byte(value)})
	plain, _ := json.Marshal(map[string]any{"name": "plain", "value": value})
	over, _ := json.Marshal(map[string]any{"name": "over", "value": value + "s"})
	for _, c := range []struct {
		body string
		want int
	}{{string(raw), http.StatusAccepted}, {string(plain), http.StatusAccepted}, {string(over), http.StatusBadRequest}} {
		code, msg, _ := do(t, http.MethodPost, srv.URL()+"/system/secrets", c.body, nil)
		if code != c.want || (code == http.StatusBadRequest && !strings.Contains(msg, "at most")) {
			t.Errorf("a secret request of %d bytes: %d %.200q, want %d", len(c.body), code, msg, c.want)
		}
	}
}
