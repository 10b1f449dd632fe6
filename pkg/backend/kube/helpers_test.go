package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

const testNS = "fns"

// fakeWorkload records the calls the backend makes, as "apply:NAME:N",
// "scale:NAME:N", "retire:POD", "delete:POD" (a forced retirement) and
// "remove:NAME", and fails scale calls as scaleErr says.
type fakeWorkload struct {
	mu       sync.Mutex
	calls    []string
	scaleErr func(call int) error // call counts scale calls from 1
	scales   int
	applyErr error
}

func (w *fakeWorkload) record(s string) {
	w.mu.Lock()
	w.calls = append(w.calls, s)
	w.mu.Unlock()
}

func (w *fakeWorkload) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

func (w *fakeWorkload) apply(_ context.Context, f stack.Function, _, replicas int32) error {
	w.record(fmt.Sprintf("apply:%s:%d", f.Name, replicas))
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.applyErr
}

func (w *fakeWorkload) scale(_ context.Context, name string, replicas int32) error {
	w.mu.Lock()
	w.scales++
	n, fail := w.scales, w.scaleErr
	w.mu.Unlock()
	w.record(fmt.Sprintf("scale:%s:%d", name, replicas))
	if fail != nil {
		return fail(n)
	}
	return nil
}

func (w *fakeWorkload) remove(_ context.Context, name string) error {
	w.record("remove:" + name)
	return nil
}

func (w *fakeWorkload) retire(_ context.Context, pod string, force bool) error {
	if force {
		w.record("delete:" + pod)
	} else {
		w.record("retire:" + pod)
	}
	return nil
}

// lastScale is the last replica count written for name, or -1.
func (w *fakeWorkload) lastScale(name string) int {
	calls := w.log()
	for i := len(calls) - 1; i >= 0; i-- {
		var n int
		if _, err := fmt.Sscanf(calls[i], "scale:"+name+":%d", &n); err == nil {
			return n
		}
	}
	return -1
}

// recorder is the dispatcher's side. Its handlers take mu, as the
// dispatcher's take its lock; a test calls Start and Stop holding mu (see
// underLock), so an event delivered from inside them would deadlock.
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

func (r *recorder) Ready(inst backend.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, recorded{kind: "ready", inst: inst, fn: inst.Function})
}

func (r *recorder) Failed(fn string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, recorded{kind: "failed", fn: fn, err: err})
}

func (r *recorder) Exited(inst backend.Instance, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, recorded{kind: "exited", inst: inst, fn: inst.Function, err: err})
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// summary is "ready:POD", "failed", "exited:POD" or "crashed:POD" per event.
func (r *recorder) summary() []string {
	var out []string
	for _, e := range r.all() {
		switch {
		case e.kind == "ready":
			out = append(out, "ready:"+e.inst.ID)
		case e.kind == "failed":
			out = append(out, "failed")
		case e.err == nil:
			out = append(out, "exited:"+e.inst.ID)
		default:
			out = append(out, "crashed:"+e.inst.ID)
		}
	}
	return out
}

// underLock runs f holding the recorder's lock, as the dispatcher holds
// its own around Start and Stop, and fails if f does not return: it
// would be waiting for its own event handler.
func (r *recorder) underLock(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		f()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return: it blocks, or delivers an event synchronously")
	}
}

type harness struct {
	b     *Backend
	kube  *fake.Clientset
	rt    *fakeWorkload
	dep   *fakeWorkload
	rec   *recorder
	clock *clocktesting.FakeClock
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{kube: fake.NewClientset(), rt: &fakeWorkload{}, dep: &fakeWorkload{}, rec: &recorder{},
		clock: clocktesting.NewFakeClock(t0)}
	opts.Clock = h.clock
	b, err := newBackend(h.kube, map[string]workload{stack.KindRTResource: h.rt, stack.KindDeployment: h.dep}, testNS, opts)
	if err != nil {
		t.Fatal(err)
	}
	b.Attach(h.rec)
	h.b = b
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- b.Close(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("close: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Close hangs: is the backend's lock held by a blocked call?")
		}
	})
	return h
}

func (h *harness) deploy(t *testing.T, f stack.Function) {
	t.Helper()
	if err := h.b.Deploy(context.Background(), f); err != nil {
		t.Fatalf("deploy %s: %v", f.Name, err)
	}
}

func (h *harness) start(t *testing.T, fn string, n int) {
	t.Helper()
	h.rec.underLock(t, func() { h.b.Start(fn, n) })
}

func (h *harness) stop(t *testing.T, inst backend.Instance) {
	t.Helper()
	h.rec.underLock(t, func() { h.b.Stop(inst) })
}

// putSlice creates or replaces the EndpointSlice name of service fn.
func (h *harness) putSlice(t *testing.T, fn, name string, eps ...discoveryv1.Endpoint) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{LabelServiceName: fn}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	client := h.kube.DiscoveryV1().EndpointSlices(testNS)
	ctx := context.Background()
	if _, err := client.Get(ctx, name, metav1.GetOptions{}); err == nil {
		if _, err := client.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := client.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond; the timeout turns a hang into a failure.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEvents waits until the recorder's summary is want.
func (h *harness) waitEvents(t *testing.T, want ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("events %v", want), func() bool { return slices.Equal(h.rec.summary(), want) })
}

// waitScale waits until the last replica count written for fn is n.
func waitScale(t *testing.T, w *fakeWorkload, fn string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s scaled to %d (calls %v)", fn, n, w.log()), func() bool { return w.lastScale(fn) == n })
}

// indexOf is the position of the first call with the given prefix, or -1.
func indexOf(calls []string, prefix string) int {
	return slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

func testFn(name string) stack.Function {
	f := stack.Function{Name: name, Image: "registry.example/" + name + ":1", Criticality: 50}
	f.Defaults()
	return f
}
