package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/backend/kube"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/stack"
)

const pauseImage = "registry.k8s.io/pause:3.10"

var rtGVR = schema.GroupVersionResource{Group: gantryv1.GroupName, Version: "v1alpha1", Resource: gantryv1.Resource}

// rtState is what the tests read from an RTResource.
type rtState struct {
	uid                   types.UID
	replicas, criticality int64
	statusCriticality     int64
	command               []any
}

func (e *env) rt(ctx context.Context, name string) (rtState, error) {
	u, err := e.dyn.Resource(rtGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return rtState{}, err
	}
	var s rtState
	s.uid = u.GetUID()
	obj := u.Object
	s.replicas, _, _ = unstructured.NestedInt64(obj, "spec", "replicas")
	s.criticality, _, _ = unstructured.NestedInt64(obj, "spec", "criticality")
	s.statusCriticality, _, _ = unstructured.NestedInt64(obj, "status", "criticality")
	containers, _, _ := unstructured.NestedSlice(obj, "spec", "template", "spec", "containers")
	if len(containers) > 0 {
		c, _ := containers[0].(map[string]any)
		s.command, _ = c["command"].([]any)
	}
	return s, nil
}

// livePods lists the function's pods that are not being deleted.
func (e *env) livePods(ctx context.Context, fn string) ([]corev1.Pod, error) {
	list, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelFunction + "=" + fn})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// checkInstances asserts that every Ready instance is a live pod of the
// function, at its pod IP and the function's port.
func (e *env) checkInstances(t *testing.T, fn string, ready []recorded) map[string]corev1.Pod {
	t.Helper()
	pods, err := e.livePods(context.Background(), fn)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	for _, r := range ready {
		p, ok := byName[r.inst.ID]
		if !ok {
			t.Fatalf("Ready instance %s is not a live pod of %s (pods %v)", r.inst.ID, fn, names(pods))
		}
		if want := net.JoinHostPort(p.Status.PodIP, "8080"); r.inst.Addr != want || r.inst.Function != fn {
			t.Errorf("instance %+v, want function %s at %s", r.inst, fn, want)
		}
	}
	return byName
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// waitEvents waits until rec holds n events of kind.
func (e *env) waitEvents(t *testing.T, rec *recorder, kind string, n int) []recorded {
	t.Helper()
	e2etest.Eventually(t, "events", func(context.Context) (bool, error) {
		if got := len(rec.of(kind)); got > n {
			t.Fatalf("%d %s events, want %d: %v", got, kind, n, rec)
		}
		return len(rec.of(kind)) == n, nil
	})
	return rec.of(kind)
}

func noCrashes(t *testing.T, rec *recorder) {
	t.Helper()
	for _, ev := range rec.all() {
		if ev.kind == "failed" || (ev.kind == "exited" && ev.err != nil) {
			t.Errorf("unexpected event %s %s: %v (all: %v)", ev.kind, ev.inst.ID, ev.err, rec)
		}
	}
}

// The RTResource path end to end: Deploy writes the object with the
// declaration's criticality, Start(2) becomes spec.replicas 2 (and, through
// the controller, two pods), Ready events carry those pods and their
// addresses as the EndpointSlices publish them, and Stop removes exactly
// the stopped instance's pod and lowers the count, with Exited(nil)
// following its endpoint.
func TestRTResourceFollowsDecisionsAndEndpointSlices(t *testing.T) {
	e := setup(t)
	e2etest.StartRTController(t, e.cfg, e.ns, "gantry-kube-e2e")
	e.startMirror(t, "resize")
	b, rec := e.newBackend(t, kube.Options{})
	ctx := context.Background()

	f := stack.Function{Name: "resize", Image: pauseImage, Command: "gantry fn resize", Criticality: 70}
	f.Defaults()
	if err := b.Deploy(ctx, f); err != nil {
		t.Fatal(err)
	}
	st, err := e.rt(ctx, "resize")
	if err != nil {
		t.Fatal(err)
	}
	if st.replicas != 0 || st.criticality != 70 || fmt.Sprintf("%q", st.command) != `["gantry" "fn" "resize"]` {
		t.Errorf("deployed RTResource %+v, want 0 replicas, criticality 70, the command split into its words", st)
	}
	svc, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "resize", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("service: %v, %+v; want a headless Service", err, svc)
	}

	b.Start("resize", 2)
	e2etest.Eventually(t, "spec.replicas 2 with the criticality in effect", func(ctx context.Context) (bool, error) {
		st, err := e.rt(ctx, "resize")
		return st.replicas == 2 && st.criticality == 70 && st.statusCriticality == 70, err
	})
	ready := e.waitEvents(t, rec, "ready", 2)
	pods := e.checkInstances(t, "resize", ready)
	for _, r := range ready {
		if ref := metav1.GetControllerOf(ptrTo(pods[r.inst.ID])); ref == nil || ref.UID != st.uid {
			t.Errorf("pod %s is not controlled by the RTResource (%+v)", r.inst.ID, ref)
		}
	}

	victim, keep := ready[0].inst, ready[1].inst
	keepUID := pods[keep.ID].UID
	b.Stop(victim)
	e2etest.Eventually(t, "spec.replicas 1", func(ctx context.Context) (bool, error) {
		st, err := e.rt(ctx, "resize")
		return st.replicas == 1, err
	})
	exited := e.waitEvents(t, rec, "exited", 1)
	if exited[0].inst.ID != victim.ID || exited[0].err != nil {
		t.Errorf("exit %+v err %v, want the stopped instance %s, cleanly", exited[0].inst, exited[0].err, victim.ID)
	}
	e2etest.Eventually(t, "only the kept pod left", func(ctx context.Context) (bool, error) {
		live, err := e.livePods(ctx, "resize")
		if err != nil {
			return false, err
		}
		if len(live) == 1 && live[0].Name == keep.ID && live[0].UID == keepUID {
			return true, nil
		}
		return false, fmt.Errorf("live pods %v, want only %s", names(live), keep.ID)
	})
	noCrashes(t, rec)
	if n := len(rec.of("ready")); n != 2 {
		t.Errorf("%d Ready events, want 2: %v", n, rec)
	}
}

func ptrTo(p corev1.Pod) *corev1.Pod { return &p }

// A start no endpoint answers fails at the ready timeout, and its replica
// is given back.
func TestStartWithoutEndpointFailsAndGivesTheReplicaBack(t *testing.T) {
	e := setup(t)
	b, rec := e.newBackend(t, kube.Options{ReadyTimeout: 3 * time.Second})
	ctx := context.Background()
	f := stack.Function{Name: "lonely", Image: pauseImage, Criticality: 5}
	f.Defaults()
	if err := b.Deploy(ctx, f); err != nil {
		t.Fatal(err)
	}
	b.Start("lonely", 1)
	e2etest.Eventually(t, "spec.replicas 1", func(ctx context.Context) (bool, error) {
		st, err := e.rt(ctx, "lonely")
		return st.replicas == 1, err
	})
	failed := e.waitEvents(t, rec, "failed", 1)
	if !errors.Is(failed[0].err, kube.ErrStartTimeout) || failed[0].fn != "lonely" {
		t.Errorf("failure %s: %v, want ErrStartTimeout", failed[0].fn, failed[0].err)
	}
	e2etest.Eventually(t, "spec.replicas back to 0", func(ctx context.Context) (bool, error) {
		st, err := e.rt(ctx, "lonely")
		return st.replicas == 0, err
	})
}

// The Deployment kind: the ReplicaSet controller honours the deletion cost,
// so Stop removes the stopped instance's pod, not the newest one it would
// pick by itself. Close with CloseDelete removes the objects.
func TestDeploymentKindStopRemovesThatPod(t *testing.T) {
	e := setup(t)
	e.startMirror(t, "web")
	b, rec := e.newBackend(t, kube.Options{})
	ctx := context.Background()
	f := stack.Function{Name: "web", Image: pauseImage, Criticality: 40, Kind: stack.KindDeployment}
	f.Defaults()
	if err := b.Deploy(ctx, f); err != nil {
		t.Fatal(err)
	}
	deps := e.kube.AppsV1().Deployments(e.ns)
	d, err := deps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 0 || d.Annotations[stack.AnnotationCriticality] != "40" {
		t.Errorf("deployment replicas %d annotations %v, want 0 and the criticality", *d.Spec.Replicas, d.Annotations)
	}

	b.Start("web", 2)
	older := e.waitEvents(t, rec, "ready", 2)
	// The third pod is created at least a second later, so it is the
	// newest by creationTimestamp: the one a scale-down takes by default.
	time.Sleep(1100 * time.Millisecond)
	b.Start("web", 1)
	e2etest.Eventually(t, "spec.replicas 3", func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == 3, err
	})
	ready := e.waitEvents(t, rec, "ready", 3)
	pods := e.checkInstances(t, "web", ready)

	victim := older[0].inst
	b.Stop(victim)
	e2etest.Eventually(t, "spec.replicas 2", func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == 2, err
	})
	exited := e.waitEvents(t, rec, "exited", 1)
	if exited[0].inst.ID != victim.ID || exited[0].err != nil {
		t.Errorf("exit %+v err %v, want the stopped instance %s, cleanly", exited[0].inst, exited[0].err, victim.ID)
	}
	var want []string
	for _, r := range ready {
		if r.inst.ID != victim.ID {
			want = append(want, r.inst.ID)
		}
	}
	slices.Sort(want)
	e2etest.Eventually(t, "the other two pods kept", func(ctx context.Context) (bool, error) {
		live, err := e.livePods(ctx, "web")
		if err != nil || !slices.Equal(names(live), want) {
			return false, err
		}
		for _, p := range live {
			if p.UID != pods[p.Name].UID {
				return false, nil
			}
		}
		return true, nil
	})
	noCrashes(t, rec)

	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := deps.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment after Close(CloseDelete): %v, want NotFound", err)
	}
	if _, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service after Close(CloseDelete): %v, want NotFound", err)
	}
}
