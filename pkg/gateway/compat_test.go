package gateway

// The compatibility test against OpenFaaS's wire format: a client written
// from OpenFaaS's published OpenAPI spec (the gateway's swagger.yml: the
// paths, methods, query parameters and status codes faas-cli uses), with
// faas-provider's own types (github.com/openfaas/faas-provider/types,
// pinned in go.mod) for every body, drives a real gateway with the real
// process runtime through what faas-cli does. docs/platform.md's faas-cli
// table points at the steps below.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openfaas/faas-provider/types"

	"gantry.dev/gantry/pkg/async"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/callid"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/statedir"
)

// startCompatGateway is gantry serve as a faas-cli user runs it: basic
// auth on the management routes, the real process runtime, and the
// embedded JetStream queue for async invocations in a folder of the
// test's.
// The state folder at dir keeps what the API creates across restarts; stop
// shuts the gateway down and closes the folder (idempotent).
func startCompatGateway(t *testing.T, dir string) (srv *Server, stop func()) {
	t.Helper()
	st, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ac := async.Config{CallbackBackoff: 10 * time.Millisecond}
	srv, err = Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0", State: st,
		Backend:  backend.NewLocal(backend.LocalConfig{Log: testWriter{t}}),
		Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Gateway:  Config{Auth: NewAuth("admin", "secret", ""), MaxBody: 1 << 20}, Async: &ac})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		st.Close()
	}
	t.Cleanup(stop)
	return srv, stop
}

// ofClient is an OpenFaaS API client: one method per operation of the
// spec that faas-cli calls.
type ofClient struct {
	t          *testing.T
	base       string
	user, pass string
}

// do sends body as JSON (nil for none) and decodes a 2xx answer into out
// (nil to ignore it); it returns the status and, for any other, the body.
func (c *ofClient) do(method, path string, body, out any) (int, string) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, strings.TrimSpace(string(raw))
}

// must is do that fails the test unless the status is want.
func (c *ofClient) must(want int, method, path string, body, out any) string {
	c.t.Helper()
	code, raw := c.do(method, path, body, out)
	if code != want {
		c.t.Fatalf("%s %s: %d %q, want %d", method, path, code, raw, want)
	}
	return raw
}

// deploy is faas-cli deploy: an update (PUT) first, a create (POST) when
// the function does not exist yet.
func (c *ofClient) deploy(d types.FunctionDeployment) (int, string) {
	c.t.Helper()
	code, raw := c.do(http.MethodPut, "/system/functions", d, nil)
	if code == http.StatusNotFound {
		code, raw = c.do(http.MethodPost, "/system/functions", d, nil)
	}
	return code, raw
}

func (c *ofClient) describe(name, ns string) types.FunctionStatus {
	c.t.Helper()
	var st types.FunctionStatus
	c.must(200, http.MethodGet, "/system/function/"+name+"?namespace="+ns, nil, &st)
	return st
}

func (c *ofClient) invoke(route, body string) (int, string) {
	c.t.Helper()
	resp, err := http.Post(c.base+"/function/"+route, "text/plain", strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// asDeployment is what faas-cli compares a deployed function with: the
// deployment fields of its status.
func asDeployment(st types.FunctionStatus) types.FunctionDeployment {
	return types.FunctionDeployment{Service: st.Name, Image: st.Image, Namespace: st.Namespace, EnvProcess: st.EnvProcess,
		EnvVars: st.EnvVars, Constraints: st.Constraints, Secrets: st.Secrets, Labels: st.Labels, Annotations: st.Annotations,
		Limits: st.Limits, Requests: st.Requests, ReadOnlyRootFilesystem: st.ReadOnlyRootFilesystem}
}

func TestFaaSCLIFlowOverOpenFaaSWireFormat(t *testing.T) {
	state, parent := t.TempDir(), t
	srv, stop := startCompatGateway(t, state)
	c := &ofClient{t: t, base: srv.URL(), user: "admin", pass: "secret"}
	inst := instanceFunction(t, "shout", "upper")

	t.Run("login and version", func(t *testing.T) {
		anon := &ofClient{t: t, base: srv.URL()}
		anon.must(401, http.MethodGet, "/system/functions", nil, nil)
		var info struct {
			Provider *types.ProviderInfo `json:"provider"`
			Version  *types.VersionInfo  `json:"version"`
			Arch     string              `json:"arch"`
		}
		c.must(200, http.MethodGet, "/system/info", nil, &info)
		if info.Provider == nil || info.Provider.Name != "gantry" || info.Provider.Orchestration == "" || info.Arch != runtime.GOARCH {
			t.Fatalf("info %+v", info)
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		var list []string
		c.must(200, http.MethodGet, "/system/namespaces", nil, &list)
		if !slices.Equal(list, []string{"openfaas-fn"}) {
			t.Fatalf("namespaces %v", list)
		}
		var def types.FunctionNamespace
		c.must(200, http.MethodGet, "/system/namespace/openfaas-fn", nil, &def)
		c.must(201, http.MethodPost, "/system/namespace/", types.FunctionNamespace{Name: "staging", Labels: map[string]string{"team": "a"}}, nil)
		c.must(202, http.MethodPut, "/system/namespace/staging",
			types.FunctionNamespace{Name: "staging", Labels: map[string]string{"team": "b"}}, nil)
		var got types.FunctionNamespace
		c.must(200, http.MethodGet, "/system/namespace/staging", nil, &got)
		if got.Name != "staging" || got.Labels["team"] != "b" {
			t.Fatalf("namespace %+v", got)
		}
		c.must(200, http.MethodGet, "/system/namespaces", nil, &list)
		if !slices.Equal(list, []string{"openfaas-fn", "staging"}) {
			t.Fatalf("namespaces %v", list)
		}
	})

	labels := map[string]string{"team": "x", "com.openfaas.scale.max": "4"}
	annotations := map[string]string{"gantry.dev/slo": "2s", "topic": "demo"}
	dep := types.FunctionDeployment{Service: "shout", Image: "example/shout:1", Namespace: "staging",
		EnvProcess: inst.Command, EnvVars: inst.Env, Constraints: []string{"node.platform.os == " + runtime.GOOS},
		Labels: &labels, Annotations: &annotations}

	t.Run("deploy refuses plainly what the local runtime cannot honour", func(t *testing.T) {
		every := dep
		every.Secrets = []string{"db"}
		every.Limits = &types.FunctionResources{Memory: "128Mi", CPU: "500m"}
		every.Requests = &types.FunctionResources{Memory: "64Mi", CPU: "100m"}
		every.ReadOnlyRootFilesystem = true
		if code, msg := c.deploy(every); code != 400 || !strings.Contains(msg, "secrets") {
			t.Fatalf("every field: %d %q", code, msg)
		}
		for reason, mutate := range map[string]func(*types.FunctionDeployment){
			"readOnlyRootFilesystem": func(d *types.FunctionDeployment) { d.ReadOnlyRootFilesystem = true },
			"GPUs":                   func(d *types.FunctionDeployment) { d.Limits = &types.FunctionResources{NvidiaGPU: "1"} },
			"does not exist":         func(d *types.FunctionDeployment) { d.Namespace = "prod" },
			"has no fprocess":        func(d *types.FunctionDeployment) { d.EnvProcess = "" }, // faas-cli store deploy
		} {
			d := dep
			mutate(&d)
			if code, msg := c.deploy(d); code != 400 || !strings.Contains(msg, reason) {
				t.Errorf("%s: %d %q", reason, code, msg)
			}
		}
	})

	before := time.Now().Add(-time.Second)
	t.Run("deploy and describe", func(t *testing.T) {
		if code, msg := c.deploy(dep); code != 202 {
			t.Fatalf("deploy: %d %q", code, msg)
		}
		st := c.describe("shout", "staging")
		if got := asDeployment(st); !reflect.DeepEqual(got, dep) {
			t.Fatalf("described as\n%+v\ndeployed\n%+v", got, dep)
		}
		if st.CreatedAt.Before(before) || st.CreatedAt.After(time.Now()) {
			t.Fatalf("createdAt %v", st.CreatedAt)
		}
		if st.AvailableReplicas != 0 || st.Replicas != 0 {
			t.Fatalf("scaled to zero until the first request: %d available of %d", st.AvailableReplicas, st.Replicas)
		}
		var list []types.FunctionStatus
		c.must(200, http.MethodGet, "/system/functions?namespace=staging", nil, &list)
		if len(list) != 1 || list[0].Name != "shout" || list[0].Namespace != "staging" {
			t.Fatalf("list staging: %+v", list)
		}
		c.must(200, http.MethodGet, "/system/functions", nil, &list)
		if len(list) != 0 {
			t.Fatalf("the default namespace lists %+v", list)
		}
	})

	t.Run("invoke", func(t *testing.T) {
		for i := range 3 {
			if code, body := c.invoke("shout.staging", fmt.Sprint("hi", i)); code != 200 || body != fmt.Sprint("HI", i) {
				t.Fatalf("invoke: %d %q", code, body)
			}
		}
		if code, body := c.invoke("shout", "x"); code != 404 || !strings.Contains(body, "shout.openfaas-fn") {
			t.Fatalf("the default namespace has no shout: %d %q", code, body)
		}
		if st := c.describe("shout", "staging"); st.InvocationCount != 3 {
			t.Fatalf("invocationCount %v, want 3", st.InvocationCount)
		}
		_, metrics := c.do(http.MethodGet, "/metrics", nil, nil)
		if !strings.Contains(metrics, `gateway_function_invocation_total{code="200",function_name="shout.staging"} 3`) {
			t.Fatalf("metrics:\n%s", grepLines(metrics, "shout"))
		}
	})

	t.Run("scale through the API", func(t *testing.T) {
		c.must(202, http.MethodPost, "/system/scale-function/shout?namespace=staging",
			types.ScaleServiceRequest{ServiceName: "shout", Namespace: "staging", Replicas: 2}, nil)
		waitUntil(t, "2 available replicas", func() bool {
			st := c.describe("shout", "staging")
			return st.AvailableReplicas == 2 && st.Replicas == 2
		})
	})

	t.Run("update keeps createdAt", func(t *testing.T) {
		created := c.describe("shout", "staging").CreatedAt
		upd := dep
		upd.EnvVars = map[string]string{"GANTRY_TEST_INSTANCE": "upper", "MODE": "2"}
		if code, msg := c.deploy(upd); code != 202 {
			t.Fatalf("update: %d %q", code, msg)
		}
		st := c.describe("shout", "staging")
		if !st.CreatedAt.Equal(created) || st.EnvVars["MODE"] != "2" {
			t.Fatalf("after update: createdAt %v (was %v), env %v", st.CreatedAt, created, st.EnvVars)
		}
		if code, body := c.invoke("shout.staging", "again"); code != 200 || body != "AGAIN" {
			t.Fatalf("invoke after update: %d %q", code, body)
		}
	})

	t.Run("restart of the gateway", func(t *testing.T) {
		// Everything created over the API comes back from the state
		// folder: an empty namespace with its labels, the function with
		// its createdAt and replicas, an app.
		c.must(201, http.MethodPost, "/system/namespace/", types.FunctionNamespace{Name: "empty", Annotations: map[string]string{"owner": "q"}}, nil)
		c.must(202, http.MethodPost, "/system/apps", map[string]any{"name": "chain", "functions": []string{"shout.staging"}, "slo": "3s"}, nil)
		before := c.describe("shout", "staging")
		stop()
		// The new gateway lives on to the test's end, not the step's.
		srv, stop = startCompatGateway(parent, state)
		c.base = srv.URL()
		var list []string
		c.must(200, http.MethodGet, "/system/namespaces", nil, &list)
		if !slices.Equal(list, []string{"empty", "openfaas-fn", "staging"}) {
			t.Fatalf("namespaces after the restart: %v", list)
		}
		var ns types.FunctionNamespace
		c.must(200, http.MethodGet, "/system/namespace/staging", nil, &ns)
		if ns.Labels["team"] != "b" {
			t.Fatalf("staging after the restart: %+v", ns)
		}
		c.must(200, http.MethodGet, "/system/namespace/empty", nil, &ns)
		if ns.Annotations["owner"] != "q" {
			t.Fatalf("empty after the restart: %+v", ns)
		}
		after := c.describe("shout", "staging")
		if got, want := asDeployment(after), asDeployment(before); !reflect.DeepEqual(got, want) {
			t.Fatalf("after the restart\n%+v\nbefore\n%+v", got, want)
		}
		if !after.CreatedAt.Equal(before.CreatedAt) {
			t.Fatalf("createdAt %v after the restart, %v before", after.CreatedAt, before.CreatedAt)
		}
		waitUntil(t, "the 2 replicas scaled to before the restart", func() bool {
			return c.describe("shout", "staging").AvailableReplicas == 2
		})
		var app struct {
			Functions []string `json:"functions"`
			SLO       string   `json:"slo"`
		}
		c.must(200, http.MethodGet, "/system/apps/chain", nil, &app)
		if !slices.Equal(app.Functions, []string{"shout.staging"}) || app.SLO != "3s" {
			t.Fatalf("app after the restart: %+v", app)
		}
		if code, body := c.invoke("shout.staging", "back"); code != 200 || body != "BACK" {
			t.Fatalf("invoke after the restart: %d %q", code, body)
		}
		c.must(202, http.MethodDelete, "/system/apps/chain", nil, nil)
		c.must(202, http.MethodDelete, "/system/namespace/empty", nil, nil)
	})

	t.Run("invoke async with a callback", func(t *testing.T) {
		rcv := newReceiver(t, nil)
		req, _ := http.NewRequest(http.MethodPost, c.base+"/async-function/shout.staging", strings.NewReader("later"))
		req.Header.Set(async.CallbackHeader, rcv.URL)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get(callid.Header)
		if resp.StatusCode != http.StatusAccepted || id == "" {
			t.Fatalf("async: %d, call id %q", resp.StatusCode, id)
		}
		cb := rcv.next(t)
		if cb.body != "LATER" || cb.header.Get(callid.Header) != id || cb.header.Get(async.StatusHeader) != "200" ||
			!strings.HasPrefix(cb.header.Get(async.FunctionHeader), "shout") {
			t.Fatalf("callback %q %v", cb.body, cb.header)
		}
	})

	t.Run("routes of other changes answer with a reason", func(t *testing.T) {
		// faas-cli logs, secret and invoke --async: served by the logs,
		// secrets and async changes once they land; never a bare 404.
		for _, r := range [][2]string{{"GET", "/system/secrets?namespace=staging"}} {
			code, body := c.do(r[0], r[1], nil, nil)
			if body == "" || strings.Contains(body, "404 page not found") {
				t.Errorf("%s %s: %d %q", r[0], r[1], code, body)
			}
		}
	})

	t.Run("remove", func(t *testing.T) {
		c.must(409, http.MethodDelete, "/system/namespace/staging", nil, nil)
		c.must(202, http.MethodDelete, "/system/functions", types.DeleteFunctionRequest{FunctionName: "shout", Namespace: "staging"}, nil)
		c.must(404, http.MethodGet, "/system/function/shout?namespace=staging", nil, nil)
		if code, _ := c.invoke("shout.staging", "x"); code != 404 {
			t.Fatalf("invoke after remove: %d", code)
		}
		_, metrics := c.do(http.MethodGet, "/metrics", nil, nil)
		if strings.Contains(metrics, "shout.staging") {
			t.Fatalf("series of the removed function:\n%s", grepLines(metrics, "shout"))
		}
		c.must(202, http.MethodDelete, "/system/namespace/staging", nil, nil)
	})
}
