// Package e2e runs the Kubernetes backend against the real local control
// plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager and
// kwok nodes). kwok's pods cannot serve traffic and the local cluster runs
// no EndpointSlice controller, so the tests publish EndpointSlices from the
// pods themselves, as that controller would (mirror), and check that the
// backend's decisions reach the cluster and its events follow the slices.
package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/backend/kube"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/localcluster"
)

// podReadyDelay is how long kwok takes to mark a pod Ready. A real
// container takes at least that long to start; with kwok's default of no
// delay, the replacement the RTResource controller creates for a stopped
// instance's deleted pod can be Ready, and created in the same second as
// the pods around it, before the controller sees the lowered count, and
// the controller then breaks the tie by name (see the RTResource section
// of docs/platform-kubernetes.md).
const podReadyDelay = time.Second

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunMain(m, localcluster.Options{Nodes: 1, Scheduler: true, ControllerManager: true,
		PodReadyDelay: podReadyDelay}))
}

// env is a test's view of the shared cluster: clients, the CRD installed,
// and a namespace of its own.
type env struct {
	cfg  *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
	ns   string
}

func setup(t *testing.T) *env {
	t.Helper()
	cfg := localcluster.Shared(t).RESTConfig()
	cfg.QPS, cfg.Burst = 100, 200
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e2etest.InstallCRD(t, dyn)
	return &env{cfg: cfg, kube: kc, dyn: dyn, ns: e2etest.Namespace(t, kc)}
}

// newBackend connects a backend to the test's namespace and closes it,
// deleting what it created, when the test ends.
func (e *env) newBackend(t *testing.T, opts kube.Options) (*kube.Backend, *recorder) {
	t.Helper()
	opts.OnClose = kube.CloseDelete
	b, err := kube.New(e.cfg, e.ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	b.Attach(rec)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b, rec
}

// recorder is the dispatcher's side of the events.
type recorder struct {
	mu  sync.Mutex
	evs []recorded
}

type recorded struct {
	kind string // ready, failed, exited
	inst backend.Instance
	fn   string
	err  error
}

func (r *recorder) add(e recorded) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
}

func (r *recorder) Ready(inst backend.Instance) {
	r.add(recorded{kind: "ready", inst: inst, fn: inst.Function})
}
func (r *recorder) Failed(fn string, err error) { r.add(recorded{kind: "failed", fn: fn, err: err}) }
func (r *recorder) Exited(inst backend.Instance, err error) {
	r.add(recorded{kind: "exited", inst: inst, fn: inst.Function, err: err})
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// of returns the events of one kind.
func (r *recorder) of(kind string) []recorded {
	var out []recorded
	for _, e := range r.all() {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) String() string {
	var parts []string
	for _, e := range r.all() {
		parts = append(parts, fmt.Sprintf("%s(%s %s err=%v)", e.kind, e.inst.ID, e.inst.Addr, e.err))
	}
	return strings.Join(parts, ", ")
}
