package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxLocalPackages bounds the local build's package graph (486 when it was
// made): past it, something heavy came into a local command and make run's
// compile grows with it.
const maxLocalPackages = 600

// The local build that make run compiles links none of the Kubernetes
// libraries nor the commands that need them, and still has every local
// command's packages.
func TestLocalBuildLinksNoKubernetes(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go tool: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-tags", LocalBuildTag, "-deps", "gantry.dev/gantry/cmd/gantry").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{"k8s.io/client-go/", "k8s.io/api/", "k8s.io/apiserver/", "sigs.k8s.io/controller-runtime",
		"github.com/virtual-kubelet/", "knative.dev/", "go.etcd.io/", "google.golang.org/grpc",
		"gantry.dev/gantry/pkg/backend/kube", "gantry.dev/gantry/pkg/scaleout", "gantry.dev/gantry/pkg/processnode",
		"gantry.dev/gantry/pkg/localcluster", "gantry.dev/gantry/pkg/knativeingress", "gantry.dev/gantry/pkg/rtcontroller"}
	linked := map[string]bool{}
	for _, d := range deps {
		linked[d] = true
		for _, bad := range forbidden {
			if strings.HasPrefix(d, bad) {
				t.Errorf("the local build links %s", d)
			}
		}
	}
	// What up, serve, fn, load and sim run on.
	for _, want := range []string{"gantry.dev/gantry/pkg/liverun", "gantry.dev/gantry/pkg/gateway", "gantry.dev/gantry/pkg/backend",
		"gantry.dev/gantry/examples/functions/fnrun", "gantry.dev/gantry/pkg/loadgen", "gantry.dev/gantry/pkg/sim"} {
		if !linked[want] {
			t.Errorf("the local build does not link %s", want)
		}
	}
	if len(deps) > maxLocalPackages {
		t.Errorf("the local build links %d packages, more than %d: something heavy came in (go list -tags %s -deps ./cmd/gantry)",
			len(deps), maxLocalPackages, LocalBuildTag)
	}
}

// The local binary, built as make run builds it, refuses every left-out
// command and flag with a usage error that names make build, and runs a
// local command.
func TestLocalBuildRefusesKubernetesCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the local binary")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go tool: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gantry")
	if out, err := exec.Command(gobin, "build", "-tags", LocalBuildTag, "-o", bin, "gantry.dev/gantry/cmd/gantry").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", LocalBuildTag, err, out)
	}
	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"cluster", "up", "--nodes", "3"}, "cluster is not in this binary"},
		{[]string{"controller"}, "controller is not in this binary"},
		{[]string{"node", "--kubeconfig", "x"}, "node is not in this binary"},
		{[]string{"bench", "queue"}, "bench queue is not in this binary"},
		{[]string{"bench", "orchestration", "--quick"}, "bench orchestration is not in this binary"},
		{[]string{"bench", "e2e"}, "bench e2e is not in this binary"},
		{[]string{"serve", "--backend", "kubernetes"}, "Kubernetes backend"},
		{[]string{"serve", "--namespace", "default"}, "Kubernetes backend"},
		{[]string{"serve", "--knative-ingress"}, "serve --knative-ingress is not in this binary"},
		{[]string{"serve", "--knative-ingress-addr", "127.0.0.1:9"}, "serve --knative-ingress-addr is not in this binary"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, c.args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("gantry %q: got %v, want exit 2; stderr: %s", c.args, err, stderr.String())
			continue
		}
		if msg := stderr.String(); !strings.Contains(msg, c.what) || !strings.Contains(msg, "make build") {
			t.Errorf("gantry %q: stderr %q does not say %q and name make build", c.args, msg, c.what)
		}
	}
	out, err := exec.Command(bin, "sim", "--app", "sentiment-analysis", "--policies", "gantry", "--duration", "20s", "--rate", "5", "--json").Output()
	if err != nil {
		t.Fatalf("gantry sim: %v", err)
	}
	var rep struct {
		Runs []struct {
			Policy   string `json:"policy"`
			Requests int    `json:"requests"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Runs) != 1 || rep.Runs[0].Policy != "gantry" || rep.Runs[0].Requests == 0 {
		t.Errorf("gantry sim from the local build: %v; %.300s", err, out)
	}
}
