package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

// testGatewayEnv, set to a state folder, makes the test binary a gateway
// serving from that folder (serveTestGateway): a process the test can
// SIGKILL. It prints its URL on the first line of stdout.
const testGatewayEnv = "GANTRY_TEST_GATEWAY_STATE"

// testGatewayPIDEnv is the PID of such a gateway process; its instances
// exit when it is gone, so a killed gateway leaves no instance behind.
const testGatewayPIDEnv = "GANTRY_TEST_GATEWAY_PID"

func serveTestGateway(dir string) {
	os.Setenv(testGatewayPIDEnv, strconv.Itoa(os.Getpid()))
	d, err := statedir.Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0", State: d,
		Backend: backend.NewLocal(backend.LocalConfig{}), Dispatch: dispatch.Config{Tick: 50 * time.Millisecond}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	select {} // until killed
}

// exitWithTestGateway ends an instance when the test gateway process that
// started it is gone.
func exitWithTestGateway() {
	pid, err := strconv.Atoi(os.Getenv(testGatewayPIDEnv))
	if err != nil {
		return
	}
	go func() {
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(100 * time.Millisecond)
		}
		os.Exit(0)
	}()
}

// startStateGateway serves from the state folder at dir, with an optional
// stack; stop shuts it down (idempotent).
func startStateGateway(t *testing.T, dir string, s *stack.Stack, auth ...*Auth) (srv *Server, stop func()) {
	t.Helper()
	d, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ServerConfig{Addr: "127.0.0.1:0", Stack: s, State: d,
		Backend: newTestLocal(t), Dispatch: dispatch.Config{Tick: 50 * time.Millisecond}}
	if len(auth) > 0 {
		cfg.Gateway.Auth = auth[0]
	}
	srv, err = Start(context.Background(), cfg)
	if err != nil {
		d.Close()
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
		d.Close()
	}
	t.Cleanup(stop)
	return srv, stop
}

func newTestLocal(t *testing.T) *backend.Local {
	return backend.NewLocal(backend.LocalConfig{Log: testWriter{t}})
}

// deploymentJSON is a deployment of the test binary in mode.
func deploymentJSON(t *testing.T, name, mode string, extra map[string]any) string {
	t.Helper()
	f := instanceFunction(t, name, mode)
	req := map[string]any{"service": name, "image": "ignored:1", "envProcess": f.Command,
		"envVars":     map[string]string{"GANTRY_TEST_INSTANCE": mode, "GREETING": "hi"},
		"labels":      map[string]string{"com.openfaas.scale.max": "4", "team": "a"},
		"annotations": map[string]string{"gantry.dev/slo": "750ms", "gantry.dev/criticality": "9"}}
	for k, v := range extra {
		req[k] = v
	}
	b, _ := json.Marshal(req)
	return string(b)
}

func describe(t *testing.T, srv *Server, name string) (int, functionStatus) {
	t.Helper()
	code, body, _ := do(t, "GET", srv.URL()+"/system/function/"+name, "", nil)
	var st functionStatus
	if code == 200 {
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("describe %s: %v: %s", name, err, body)
		}
	}
	return code, st
}

func TestFunctionsSurviveAGracefulRestart(t *testing.T) {
	dir := t.TempDir()
	srv, stop := startStateGateway(t, dir, nil)
	api := func(srv *Server, method, path, body string, want int) {
		t.Helper()
		if code, got, _ := do(t, method, srv.URL()+path, body, nil); code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, code, got, want)
		}
	}
	api(srv, "POST", "/system/functions", deploymentJSON(t, "keep", "echo", nil), 202)
	// The update wins over the deploy, and the scale is kept across it.
	api(srv, "PUT", "/system/functions", deploymentJSON(t, "keep", "upper", nil), 202)
	api(srv, "POST", "/system/scale-function/keep", `{"serviceName":"keep","replicas":2}`, 202)
	api(srv, "POST", "/system/functions", deploymentJSON(t, "gone", "echo", nil), 202)
	api(srv, "DELETE", "/system/functions", `{"functionName":"gone"}`, 202)
	// Refused changes leave no file.
	api(srv, "PUT", "/system/functions", deploymentJSON(t, "never", "echo", nil), 404)
	_, before := describe(t, srv, "keep")
	stop()

	srv, stop = startStateGateway(t, dir, nil)
	code, after := describe(t, srv, "keep")
	if code != 200 {
		t.Fatalf("after restart: describe keep: %d", code)
	}
	for _, name := range []string{"gone", "never"} {
		if code, _ := describe(t, srv, name); code != 404 {
			t.Fatalf("after restart: %s: %d, want 404", name, code)
		}
	}
	if after.EnvProcess != before.EnvProcess || after.Image != before.Image || after.SLO != "750ms" ||
		after.Criticality != 9 || after.MaxScale != 4 || after.Labels["team"] != "a" ||
		after.EnvVars["GREETING"] != "hi" || after.EnvVars["GANTRY_TEST_INSTANCE"] != "upper" {
		t.Fatalf("settings changed across the restart:\nbefore %+v\nafter  %+v", before, after)
	}
	waitUntil(t, "the stored scale of 2", func() bool { st, _ := srv.D.Function("keep"); return st.Available == 2 })
	if code, body, _ := do(t, "POST", srv.URL()+"/function/keep", "again", nil); code != 200 || body != "AGAIN" {
		t.Fatalf("invoke after restart: %d %q", code, body)
	}

	// A stack file wins for the functions it names; the stored one comes
	// back when a later start has no stack.
	stop()
	srv, stop = startStateGateway(t, dir, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "keep", "echo")}})
	if code, body, _ := do(t, "POST", srv.URL()+"/function/keep", "quiet", nil); code != 200 || body != "quiet" {
		t.Fatalf("with a stack naming it: %d %q, want the stack's echo", code, body)
	}
	stop()
	srv, _ = startStateGateway(t, dir, nil)
	if code, body, _ := do(t, "POST", srv.URL()+"/function/keep", "loud", nil); code != 200 || body != "LOUD" {
		t.Fatalf("without the stack again: %d %q, want the stored upper", code, body)
	}
}

func TestFunctionsSurviveAKilledGateway(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), testGatewayEnv+"="+dir)
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the gateway process printed no URL: %v", err)
	}
	url := strings.TrimSpace(line)
	if code, body, _ := do(t, "POST", url+"/system/functions", deploymentJSON(t, "survivor", "upper", nil), nil); code != 202 {
		t.Fatalf("deploy: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", url+"/system/scale-function/survivor", `{"replicas":0}`, nil); code != 202 {
		t.Fatalf("scale: %d %s", code, body)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, statedir.Functions, "survivor.json")); err != nil {
		t.Fatalf("no file for the function: %v", err)
	}

	srv, _ := startStateGateway(t, dir, nil)
	code, st := describe(t, srv, "survivor")
	if code != 200 || st.SLO != "750ms" || st.Criticality != 9 || st.EnvVars["GREETING"] != "hi" {
		t.Fatalf("after the kill: %d %+v", code, st)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/survivor", "alive", nil); code != 200 || body != "ALIVE" {
		t.Fatalf("invoke after the kill: %d %q", code, body)
	}
}

func TestABadStoredFileIsSkippedAndTheRestServed(t *testing.T) {
	dir := t.TempDir()
	srv, stop := startStateGateway(t, dir, nil)
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "good", "echo", nil), nil); code != 202 {
		t.Fatalf("deploy: %d %s", code, body)
	}
	stop()
	fns := filepath.Join(dir, statedir.Functions)
	for name, content := range map[string]string{
		"torn.json":   `{"version":1,"deployment":{"serv`,
		"other.json":  `{"version":1,"deployment":{"service":"not-other","envProcess":"x"}}`,
		"future.json": `{"version":99,"deployment":{"service":"future","envProcess":"x"}}`,
	} {
		if err := os.WriteFile(filepath.Join(fns, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv, _ = startStateGateway(t, dir, nil)
	var names []string
	for _, st := range srv.D.Functions() {
		names = append(names, st.Decl.Name)
	}
	if strings.Join(names, ",") != "good" {
		t.Fatalf("served %v, want only good", names)
	}
}

func TestAFunctionInAnotherNamespaceSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	srv, stop := startStateGateway(t, dir, nil)
	if code, body, _ := do(t, "POST", srv.URL()+"/system/namespace/", `{"name":"staging"}`, nil); code/100 != 2 {
		t.Fatalf("create namespace: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "keep", "upper", map[string]any{"namespace": "staging"}), nil); code != 202 {
		t.Fatalf("deploy: %d %s", code, body)
	}
	stop()
	if _, err := os.Stat(filepath.Join(dir, statedir.Functions, "keep.staging.json")); err != nil {
		t.Fatalf("no file keyed NAME.NAMESPACE: %v", err)
	}
	srv, _ = startStateGateway(t, dir, nil)
	if code, body, _ := do(t, "POST", srv.URL()+"/function/keep.staging", "ns", nil); code != 200 || body != "NS" {
		t.Fatalf("after restart: %d %q", code, body)
	}
	if code, _, _ := do(t, "POST", srv.URL()+"/function/keep", "x", nil); code != 404 {
		t.Fatalf("the default namespace has no keep: %d", code)
	}
}

// A scale outside the function's bounds is refused, below its minimum as
// above its maximum (below, the autoscaler started them again at once: the
// count was accepted and not kept). An update that moves the bounds past
// a stored scale keeps the function: a restart restores the nearest count
// within them (before, it logged the function as not deployed again and
// served it with no instance).
func TestScaleOutsideTheBoundsIsRefusedAndRestoredWithinThem(t *testing.T) {
	dir := t.TempDir()
	srv, stop := startStateGateway(t, dir, nil)
	bounds := func(min, max string) map[string]any {
		return map[string]any{"labels": map[string]string{"com.openfaas.scale.min": min, "com.openfaas.scale.max": max}}
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", deploymentJSON(t, "b", "echo", bounds("1", "4")), nil); code != 202 {
		t.Fatalf("deploy: %d %q", code, body)
	}
	for n, want := range map[string]string{"0": "replicas 0 must be in [1, 4]", "5": "replicas 5 must be in [1, 4]"} {
		code, body, _ := do(t, "POST", srv.URL()+"/system/scale-function/b", `{"serviceName":"b","replicas":`+n+`}`, nil)
		if code != 400 || !strings.Contains(body, want) || !strings.Contains(body, "com.openfaas.scale.min") {
			t.Errorf("scale to %s: %d %q, want 400 saying %q", n, code, body, want)
		}
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/system/scale-function/b", `{"serviceName":"b","replicas":4}`, nil); code != 202 {
		t.Fatalf("scale to 4: %d %q", code, body)
	}
	// The stored count, 4, is above the maximum the update sets.
	if code, body, _ := do(t, "PUT", srv.URL()+"/system/functions", deploymentJSON(t, "b", "echo", bounds("0", "2")), nil); code != 202 {
		t.Fatalf("update: %d %q", code, body)
	}
	stop()
	srv, _ = startStateGateway(t, dir, nil)
	waitUntil(t, "two instances of b after the restart", func() bool { st, _ := srv.D.Function("b"); return st.Available == 2 })
	if code, body, _ := do(t, "POST", srv.URL()+"/function/b", "x", nil); code != 200 || body != "x" {
		t.Fatalf("invoke after the restart: %d %q", code, body)
	}
}
