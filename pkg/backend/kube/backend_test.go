package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

// readyInstance finds the Ready event of pod.
func (h *harness) readyInstance(t *testing.T, pod string) backend.Instance {
	t.Helper()
	for _, e := range h.rec.all() {
		if e.kind == "ready" && e.inst.ID == pod {
			return e.inst
		}
	}
	t.Fatalf("no Ready for %s in %v", pod, h.rec.summary())
	return backend.Instance{}
}

func TestDeployCreatesAHeadlessServiceAndTheWorkload(t *testing.T) {
	h := newHarness(t, Options{})
	f := testFn("resize")
	f.MinScale = 1
	h.deploy(t, f)
	svc, err := h.kube.CoreV1().Services(testNS).Get(context.Background(), "resize", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector[LabelFunction] != "resize" {
		t.Errorf("service spec %+v, want headless, selecting the function's pods", svc.Spec)
	}
	// A new workload starts at the minimum, and the worker keeps it
	// there; nothing of the other kind may be left behind.
	waitScale(t, h.rt, "resize", 1)
	if got := h.rt.log(); got[0] != "apply:resize:1" || len(got) != 2 {
		t.Errorf("rtresource calls %v, want apply at 1 replica, then a scale to 1", got)
	}
	if got := h.dep.log(); len(got) != 1 || got[0] != "remove:resize" {
		t.Errorf("deployment calls %v, want the stale-kind cleanup only", got)
	}

	f.Kind = stack.KindDeployment
	h.deploy(t, f)
	if got := h.dep.log(); indexOf(got, "apply:resize:") < 0 || indexOf(h.rt.log(), "remove:resize") < 0 {
		t.Errorf("after switching to a Deployment: deployment calls %v, rtresource calls %v", got, h.rt.log())
	}
}

func TestDeployRefusesWhatItCannotRunOrDoesNotOwn(t *testing.T) {
	h := newHarness(t, Options{})
	noImage := testFn("local")
	noImage.Image, noImage.Command = "", "gantry fn translate"
	if err := h.b.Deploy(context.Background(), noImage); !errors.Is(err, stack.ErrInvalid) {
		t.Errorf("deploy without an image: %v, want ErrInvalid", err)
	}
	users := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: testNS}}
	if _, err := h.kube.CoreV1().Services(testNS).Create(context.Background(), users, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := h.b.Deploy(context.Background(), testFn("theirs"))
	if err == nil || !strings.Contains(err.Error(), "not managed by Gantry") {
		t.Errorf("deploy over a user's Service: %v, want a refusal", err)
	}
}

// A deploy whose workload is refused leaves no Service behind: nothing
// would delete it, since the function is not registered.
func TestFailedDeployRemovesTheServiceItCreated(t *testing.T) {
	h := newHarness(t, Options{})
	h.rt.applyErr = apierrors.NewForbidden(schema.GroupResource{Group: "gantry.dev", Resource: "rtresources"}, "x", errors.New("rbac"))
	if err := h.b.Deploy(context.Background(), testFn("denied")); !apierrors.IsForbidden(err) {
		t.Fatalf("deploy: %v, want the workload's Forbidden", err)
	}
	if _, err := h.kube.CoreV1().Services(testNS).Get(context.Background(), "denied", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service after a failed deploy: %v, want NotFound", err)
	}
	h.start(t, "denied", 1)
	h.waitEvents(t, "failed")
}

// The whole loop: Start writes the count, endpoints answer with Ready,
// Stop retires that pod before lowering the count, and endpoints going
// away are Exited, cleanly for the stopped instance and with an error for
// the other.
func TestStartScalesEndpointsReportReadyAndStopRetiresThePod(t *testing.T) {
	h := newHarness(t, Options{})
	h.deploy(t, testFn("sent"))
	h.start(t, "sent", 2)
	waitScale(t, h.rt, "sent", 2)

	h.putSlice(t, "sent", "sent-x1", ep("sent-a", "10.0.0.1", ptr.To(true), nil), ep("sent-b", "10.0.0.2", nil, nil))
	h.waitEvents(t, "ready:sent-a", "ready:sent-b")
	a := h.readyInstance(t, "sent-a")
	if a.Addr != "10.0.0.1:8080" || a.Function != "sent" {
		t.Errorf("instance %+v, want sent at 10.0.0.1:8080", a)
	}

	h.stop(t, a)
	waitScale(t, h.rt, "sent", 1)
	calls := h.rt.log()
	if r, s := indexOf(calls, "retire:sent-a"), indexOf(calls, "scale:sent:1"); r < 0 || r > s {
		t.Errorf("calls %v: the pod must be retired before the count is lowered", calls)
	}
	h.putSlice(t, "sent", "sent-x1", ep("sent-b", "10.0.0.2", nil, nil))
	h.waitEvents(t, "ready:sent-a", "ready:sent-b", "exited:sent-a")

	h.putSlice(t, "sent", "sent-x1", ep("sent-b", "10.0.0.2", ptr.To(false), nil))
	h.waitEvents(t, "ready:sent-a", "ready:sent-b", "exited:sent-a", "crashed:sent-b")
	if err := h.rec.all()[3].err; !errors.Is(err, ErrEndpointGone) {
		t.Errorf("crash error %v, want ErrEndpointGone", err)
	}
	// The instance that left on its own leaves the count too.
	waitScale(t, h.rt, "sent", 0)
}

func TestStartOfAnUnknownFunctionFailsAsynchronously(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(t, "nope", 2)
	h.waitEvents(t, "failed", "failed")
	for _, e := range h.rec.all() {
		if !errors.Is(e.err, backend.ErrNotDeployed) || e.fn != "nope" {
			t.Errorf("failure %q: %v, want ErrNotDeployed", e.fn, e.err)
		}
	}
}

func TestStartThatNeverBecomesReadyFailsAtTheTimeout(t *testing.T) {
	h := newHarness(t, Options{ReadyTimeout: time.Minute})
	h.deploy(t, testFn("slow"))
	h.start(t, "slow", 1)
	waitScale(t, h.rt, "slow", 1)
	h.b.sweep(t0.Add(59 * time.Second))
	h.b.sweep(t0.Add(time.Minute))
	h.waitEvents(t, "failed")
	if err := h.rec.all()[0].err; !errors.Is(err, ErrStartTimeout) {
		t.Errorf("failure %v, want ErrStartTimeout", err)
	}
	waitScale(t, h.rt, "slow", 0)
}

func TestUnscalableWorkloadFailsStartsAtOnce(t *testing.T) {
	h := newHarness(t, Options{})
	h.deploy(t, testFn("gone"))
	h.rt.mu.Lock()
	h.rt.scaleErr = func(int) error {
		return apierrors.NewNotFound(schema.GroupResource{Group: "gantry.dev", Resource: "rtresources"}, "gone")
	}
	h.rt.mu.Unlock()
	h.start(t, "gone", 2)
	h.waitEvents(t, "failed", "failed")
	if err := h.rec.all()[0].err; !apierrors.IsNotFound(err) {
		t.Errorf("failure %v, want the API's NotFound", err)
	}
}

func TestTransientScaleErrorIsRetried(t *testing.T) {
	h := newHarness(t, Options{})
	h.deploy(t, testFn("flaky"))
	waitScale(t, h.rt, "flaky", 0) // the deploy's own write
	h.rt.mu.Lock()
	h.rt.scaleErr = func(call int) error {
		if call == 2 {
			return apierrors.NewServiceUnavailable("etcd leader change")
		}
		return nil
	}
	h.rt.mu.Unlock()
	h.start(t, "flaky", 1)
	eventually(t, "a second scale write", func() bool {
		calls := h.rt.log()
		return len(calls) == 4 && calls[2] == "scale:flaky:1" && calls[3] == "scale:flaky:1"
	})
	if len(h.rec.all()) != 0 {
		t.Errorf("events %v: a retried write must not fail the start", h.rec.summary())
	}
}

// A restarted gateway finds ready pods: they answer the first starts at
// once instead of new pods being started.
func TestEndpointsFromBeforeDeployAnswerStarts(t *testing.T) {
	h := newHarness(t, Options{})
	h.putSlice(t, "warm", "warm-x1", ep("warm-a", "10.0.0.1", nil, nil))
	h.deploy(t, testFn("warm"))
	h.start(t, "warm", 1)
	h.waitEvents(t, "ready:warm-a")
	waitScale(t, h.rt, "warm", 1)
}

func TestStoppedPodStillRoutableAfterTheGraceIsDeleted(t *testing.T) {
	h := newHarness(t, Options{StopGrace: time.Minute})
	f := testFn("web")
	f.Kind = stack.KindDeployment
	h.deploy(t, f)
	h.start(t, "web", 1)
	h.putSlice(t, "web", "web-x1", ep("web-a", "10.0.0.1", nil, nil))
	h.waitEvents(t, "ready:web-a")
	h.stop(t, h.readyInstance(t, "web-a"))
	waitScale(t, h.dep, "web", 0)
	h.b.sweep(t0.Add(time.Minute))
	eventually(t, "a forced delete", func() bool { return indexOf(h.dep.log(), "delete:web-a") >= 0 })
}

func TestRedeployKeepsTheCountTheDispatcherAskedFor(t *testing.T) {
	h := newHarness(t, Options{})
	f := testFn("img")
	h.deploy(t, f)
	h.start(t, "img", 3)
	waitScale(t, h.rt, "img", 3)
	f.Image = "registry.example/img:2"
	h.deploy(t, f)
	calls := h.rt.log()
	if indexOf(calls, "apply:img:3") < 0 {
		t.Errorf("calls %v: the update must carry the current count, not the minimum", calls)
	}
}

func TestUndeployFailsPendingStartsAndEndsInstances(t *testing.T) {
	h := newHarness(t, Options{})
	h.deploy(t, testFn("bye"))
	h.start(t, "bye", 2)
	h.putSlice(t, "bye", "bye-x1", ep("bye-a", "10.0.0.1", nil, nil))
	h.waitEvents(t, "ready:bye-a")
	if err := h.b.Undeploy(context.Background(), "bye"); err != nil {
		t.Fatal(err)
	}
	h.waitEvents(t, "ready:bye-a", "failed", "exited:bye-a")
	if indexOf(h.rt.log(), "remove:bye") < 0 {
		t.Errorf("rtresource calls %v, want the object removed", h.rt.log())
	}
	if _, err := h.kube.CoreV1().Services(testNS).Get(context.Background(), "bye", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service after undeploy: %v, want NotFound", err)
	}
	if err := h.b.Undeploy(context.Background(), "bye"); !errors.Is(err, backend.ErrNotDeployed) {
		t.Errorf("second undeploy: %v, want ErrNotDeployed", err)
	}
}

func TestCloseScalesToZeroAndDeliversEveryEventFirst(t *testing.T) {
	h := newHarness(t, Options{})
	h.deploy(t, testFn("end"))
	h.start(t, "end", 2)
	h.putSlice(t, "end", "end-x1", ep("end-a", "10.0.0.1", nil, nil))
	h.waitEvents(t, "ready:end-a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// No waiting: Close returns after the last event went out.
	if got := h.rec.summary(); strings.Join(got, " ") != "ready:end-a failed exited:end-a" {
		t.Errorf("events at Close's return %v", got)
	}
	if h.rt.lastScale("end") != 0 {
		t.Errorf("calls %v, want a final scale to 0", h.rt.log())
	}
	// A start after Close still ends in an event, never silence.
	h.start(t, "end", 1)
	h.waitEvents(t, "ready:end-a", "failed", "exited:end-a", "failed")
	if err := h.rec.all()[3].err; !errors.Is(err, ErrClosed) {
		t.Errorf("failure after close %v, want ErrClosed", err)
	}
}

func TestCloseKeepLeavesTheCluster(t *testing.T) {
	h := newHarness(t, Options{OnClose: CloseKeep})
	h.deploy(t, testFn("stay"))
	h.start(t, "stay", 1)
	waitScale(t, h.rt, "stay", 1)
	if err := h.b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.rt.lastScale("stay") != 1 {
		t.Errorf("calls %v: CloseKeep must not scale", h.rt.log())
	}
}

// clusterWrites lists the writes the backend made through the clientset
// as "VERB RESOURCE", leaving out the EndpointSlices the tests write.
func (h *harness) clusterWrites() []string {
	var out []string
	for _, a := range h.kube.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		if a.GetResource().Resource == "endpointslices" {
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

// seen waits until the backend's view of fn holds pod, so a test can
// tell an event that did not come from one that has not come yet.
func (h *harness) seen(t *testing.T, fn, pod string) {
	t.Helper()
	eventually(t, fn+" seeing "+pod, func() bool {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		st, ok := h.b.fns[fn]
		if !ok {
			return false
		}
		_, ok = st.view[pod]
		return ok
	})
}

// A follower routes to the leader's pods and writes nothing: not on
// Deploy, Start, Stop, Undeploy or Close, whatever OnClose says.
func TestFollowerWritesNothingAndReportsEveryEndpoint(t *testing.T) {
	h := newHarness(t, Options{Follow: true, OnClose: CloseDelete})
	f := testFn("shared")
	f.MinScale = 2
	h.deploy(t, f)
	h.deploy(t, testFn("dropped"))
	h.putSlice(t, "shared", "shared-x1", ep("shared-a", "10.0.0.1", nil, nil), ep("shared-b", "10.0.0.2", nil, nil))
	h.waitEvents(t, "ready:shared-a", "ready:shared-b")
	if a := h.readyInstance(t, "shared-a"); a.Addr != "10.0.0.1:8080" || a.ColdStart != 0 {
		t.Errorf("instance %+v, want shared-a at 10.0.0.1:8080 with no cold start", a)
	}

	h.start(t, "shared", 1)
	h.stop(t, h.readyInstance(t, "shared-a"))
	h.waitEvents(t, "ready:shared-a", "ready:shared-b", "failed")
	if err := h.rec.all()[2].err; !errors.Is(err, ErrFollower) {
		t.Errorf("failure %v, want ErrFollower", err)
	}
	// The leader retired shared-a: a clean exit, not a lost instance.
	h.putSlice(t, "shared", "shared-x1", ep("shared-b", "10.0.0.2", nil, nil))
	h.waitEvents(t, "ready:shared-a", "ready:shared-b", "failed", "exited:shared-a")

	if err := h.b.Undeploy(context.Background(), "dropped"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.waitEvents(t, "ready:shared-a", "ready:shared-b", "failed", "exited:shared-a", "exited:shared-b")
	if rt, dep, kube := h.rt.log(), h.dep.log(), h.clusterWrites(); len(rt)+len(dep)+len(kube) != 0 {
		t.Errorf("a follower wrote: rtresource %v, deployment %v, clientset %v", rt, dep, kube)
	}
}

// The elected replica writes the objects it never wrote while following,
// and its first count keeps exactly the pods it adopted.
func TestLeadWritesTheObjectsAndCountsTheAdoptedInstances(t *testing.T) {
	h := newHarness(t, Options{Follow: true})
	f := testFn("took")
	f.MinScale = 1
	h.deploy(t, f)
	h.putSlice(t, "took", "took-x1", ep("took-a", "10.0.0.1", nil, nil), ep("took-b", "10.0.0.2", nil, nil))
	h.waitEvents(t, "ready:took-a", "ready:took-b")
	if err := h.b.Lead(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitScale(t, h.rt, "took", 2)
	if calls := h.rt.log(); calls[0] != "apply:took:2" {
		t.Errorf("rtresource calls %v, want an apply at the 2 adopted instances first", calls)
	}
	if _, err := h.kube.CoreV1().Services(testNS).Get(context.Background(), "took", metav1.GetOptions{}); err != nil {
		t.Errorf("service after lead: %v", err)
	}

	// A leader's new endpoint is a spare for the next start.
	h.putSlice(t, "took", "took-x1", ep("took-a", "10.0.0.1", nil, nil), ep("took-b", "10.0.0.2", nil, nil),
		ep("took-c", "10.0.0.3", nil, nil))
	h.seen(t, "took", "took-c")
	if got := h.rec.summary(); len(got) != 2 {
		t.Fatalf("events %v: a leader must not adopt a new endpoint nobody asked for", got)
	}
	h.start(t, "took", 1)
	h.waitEvents(t, "ready:took-a", "ready:took-b", "ready:took-c")
	waitScale(t, h.rt, "took", 3)

	// An adopted instance that goes on its own is now a loss.
	h.putSlice(t, "took", "took-x1", ep("took-b", "10.0.0.2", nil, nil), ep("took-c", "10.0.0.3", nil, nil))
	h.waitEvents(t, "ready:took-a", "ready:took-b", "ready:took-c", "crashed:took-a")
	waitScale(t, h.rt, "took", 2)

	if err := h.b.Lead(context.Background()); err != nil {
		t.Errorf("second lead: %v, want nil", err)
	}
	if n := len(slices.DeleteFunc(h.rt.log(), func(c string) bool { return !strings.HasPrefix(c, "apply:") })); n != 1 {
		t.Errorf("calls %v: a second Lead must write nothing", h.rt.log())
	}
	// A leader closes as configured: here, the default scale to zero.
	if err := h.b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.rt.lastScale("took") != 0 {
		t.Errorf("calls %v, want the leader's Close to scale to 0", h.rt.log())
	}
}

// A Lead that could not write every object leaves the backend following,
// so no worker scales an object that may not exist, and it can be retried.
func TestFailedLeadKeepsFollowingAndCanBeRetried(t *testing.T) {
	h := newHarness(t, Options{Follow: true})
	h.deploy(t, testFn("again"))
	h.putSlice(t, "again", "again-x1", ep("again-a", "10.0.0.1", nil, nil))
	h.waitEvents(t, "ready:again-a")
	h.rt.mu.Lock()
	h.rt.applyErr = apierrors.NewForbidden(schema.GroupResource{Group: "gantry.dev", Resource: "rtresources"}, "again", errors.New("rbac"))
	h.rt.mu.Unlock()
	if err := h.b.Lead(context.Background()); !apierrors.IsForbidden(err) {
		t.Fatalf("lead: %v, want the workload's Forbidden", err)
	}
	h.start(t, "again", 1)
	h.waitEvents(t, "ready:again-a", "failed")
	if err := h.rec.all()[1].err; !errors.Is(err, ErrFollower) {
		t.Errorf("start after a failed lead: %v, want ErrFollower", err)
	}

	h.rt.mu.Lock()
	h.rt.applyErr = nil
	h.rt.mu.Unlock()
	if err := h.b.Lead(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitScale(t, h.rt, "again", 1)
	if n := strings.Count(strings.Join(h.rt.log(), " "), "scale:"); n != 1 {
		t.Errorf("calls %v: the only count written must be the leader's", h.rt.log())
	}
}
