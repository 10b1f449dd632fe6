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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/config/crd"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/backend/kube"
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

var crdOnce struct {
	sync.Once
	err error
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
	crdOnce.Do(func() { crdOnce.err = crd.Install(context.Background(), dyn, nil) })
	if crdOnce.err != nil {
		t.Fatalf("install CRD: %v", crdOnce.err)
	}
	e := &env{cfg: cfg, kube: kc, dyn: dyn, ns: namespaceFor(t)}
	e.createNamespace(t)
	return e
}

func namespaceFor(t *testing.T) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	return strings.TrimRight(name, "-") + "-" + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
}

// createNamespace makes the test's namespace and waits for its default
// service account, without which pods are rejected.
func (e *env) createNamespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), e.ns, metav1.DeleteOptions{}) })
	e.eventually(t, "the default service account", func(ctx context.Context) (bool, error) {
		_, err := e.kube.CoreV1().ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// eventually polls cond until it holds. The timeout turns a hang into a
// failure; it is not what the test asserts.
func (e *env) eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
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
