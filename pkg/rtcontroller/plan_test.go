package rtcontroller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

func TestPlanCreatesMissingReplicas(t *testing.T) {
	p := computePlan(testRT(3), nPods("p", "h", 1), "h", t0)
	if p.create != 2 || len(p.delete) != 0 {
		t.Fatalf("plan = create %d delete %v, want create 2", p.create, names(p.delete))
	}
}

// The reference counted Terminating and Failed pods as live and never
// replaced Failed ones.
func TestPlanReplacesFailedAndIgnoresTerminating(t *testing.T) {
	pods := []*corev1.Pod{
		testPod("live", "h", 0),
		testPod("failed", "h", 1, failed),
		testPod("done", "h", 2, succeeded),
		testPod("going", "h", 3, terminating),
	}
	p := computePlan(testRT(3), pods, "h", t0)
	if p.create != 2 {
		t.Errorf("create = %d, want 2 (only one live pod)", p.create)
	}
	if got := names(p.delete); !slices.Equal(got, []string{"failed", "done"}) {
		t.Errorf("delete = %v, want the finished pods [failed done]", got)
	}
}

func TestScaleDownDeletesNotReadyFirstThenNewest(t *testing.T) {
	pods := []*corev1.Pod{
		testPod("old-ready", "h", 0),
		testPod("new-ready", "h", 50),
		testPod("mid-ready", "h", 20),
		testPod("not-ready", "h", 5, notReady),
		testPod("pending", "h", 6, pending),
		testPod("unscheduled", "h", 7, unscheduled),
	}
	p := computePlan(testRT(1), pods, "h", t0)
	want := []string{"unscheduled", "pending", "not-ready", "new-ready", "mid-ready"}
	if got := names(p.delete); !slices.Equal(got, want) {
		t.Fatalf("delete = %v, want %v", got, want)
	}
	if p.create != 0 {
		t.Fatalf("create = %d, want 0", p.create)
	}
}

func TestPlanIsIdleWhenConverged(t *testing.T) {
	p := computePlan(testRT(2), nPods("p", "h", 2), "h", t0)
	if p.create != 0 || len(p.delete) != 0 {
		t.Fatalf("plan = %+v, want nothing to do", p)
	}
}

func TestRecreateDeletesOldBeforeCreatingNew(t *testing.T) {
	rt := testRT(2)
	rt.Spec.Strategy.Type = gantryv1.RecreateStrategy
	p := computePlan(rt, nPods("old", "h1", 2), "h2", t0)
	if p.create != 0 || len(p.delete) != 2 {
		t.Fatalf("first step: create %d delete %v, want delete both old pods only", p.create, names(p.delete))
	}
	p = computePlan(rt, nPods("old", "h1", 2, terminating), "h2", t0)
	if p.create != 0 {
		t.Fatalf("while old pods terminate: create %d, want 0", p.create)
	}
	p = computePlan(rt, nil, "h2", t0)
	if p.create != 2 {
		t.Fatalf("after old pods are gone: create %d, want 2", p.create)
	}
}

func TestRollingUpdateRespectsSurgeAndUnavailability(t *testing.T) {
	rt := testRT(4)
	rt.Spec.Strategy = gantryv1.Strategy{Type: gantryv1.RollingUpdateStrategy, RollingUpdate: &gantryv1.RollingUpdate{
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	p := computePlan(rt, nPods("old", "h1", 4), "h2", t0)
	if p.create != 1 || len(p.delete) != 0 {
		t.Fatalf("start: create %d delete %v, want 1 surge pod and no delete", p.create, names(p.delete))
	}
	// The surge pod exists but is not ready: nothing old may go yet.
	pods := append(nPods("old", "h1", 4), testPod("new0", "h2", 60, notReady))
	if p = computePlan(rt, pods, "h2", t0); p.create != 0 || len(p.delete) != 0 {
		t.Fatalf("surge pod not ready: create %d delete %v, want nothing", p.create, names(p.delete))
	}
	pods[4] = testPod("new0", "h2", 60)
	if p = computePlan(rt, pods, "h2", t0); p.create != 0 || len(p.delete) != 1 {
		t.Fatalf("surge pod ready: create %d delete %v, want one old pod deleted", p.create, names(p.delete))
	}
}

func TestRollingUpdateDeletesUnavailableOldPodsFirst(t *testing.T) {
	rt := testRT(2)
	rt.Spec.Strategy = gantryv1.Strategy{Type: gantryv1.RollingUpdateStrategy, RollingUpdate: &gantryv1.RollingUpdate{
		MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	pods := []*corev1.Pod{testPod("broken", "h1", 0, notReady), testPod("ok", "h1", 1)}
	p := computePlan(rt, pods, "h2", t0)
	if got := names(p.delete); !slices.Equal(got, []string{"broken"}) {
		t.Fatalf("delete = %v, want [broken]: an unready old pod serves nobody", got)
	}
}

// maxUnavailable bounds every deletion of old pods, unavailable ones too:
// old pods that are still starting would be available soon, and deleting
// them all at once leaves their replacements to start from nothing. With 4
// replicas and maxUnavailable 1 (minAvailable 3), 4 live pods allow one
// deletion, as the Deployment controller computes it.
func TestRollingUpdateDeletesUnavailableOldPodsWithinMaxUnavailable(t *testing.T) {
	rt := testRT(4)
	rt.Spec.Strategy = gantryv1.Strategy{Type: gantryv1.RollingUpdateStrategy, RollingUpdate: &gantryv1.RollingUpdate{
		MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	pods := append(nPods("starting", "h1", 3, notReady), testPod("ok", "h1", 9))
	p := computePlan(rt, pods, "h2", t0)
	if len(p.delete) != 1 || p.delete[0].Name == "ok" {
		t.Fatalf("delete = %v, want one of the starting old pods, not all three", names(p.delete))
	}
	// A new pod that is not available yet counts against the same bound.
	pods = append(nPods("starting", "h1", 2, notReady), testPod("ok", "h1", 9), testPod("new", "h2", 10, notReady))
	if p = computePlan(rt, pods, "h2", t0); len(p.delete) != 0 {
		t.Fatalf("delete = %v while the new pod is unavailable, want none", names(p.delete))
	}
}

func TestRolloutBoundsDefaultsAndProgress(t *testing.T) {
	cases := []struct {
		name        string
		ru          *gantryv1.RollingUpdate
		want        int
		surge, unav int
	}{
		{"defaults round surge up and unavailable down", nil, 10, 3, 2},
		{"both zero still lets one pod go", &gantryv1.RollingUpdate{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("0%"))}, 4, 0, 1},
		{"malformed percentage counts as zero", &gantryv1.RollingUpdate{MaxSurge: ptr.To(intstr.FromString("lots")), MaxUnavailable: ptr.To(intstr.FromInt32(2))}, 4, 0, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, u := rolloutBounds(tc.ru, tc.want)
			if s != tc.surge || u != tc.unav {
				t.Fatalf("bounds = (%d, %d), want (%d, %d)", s, u, tc.surge, tc.unav)
			}
		})
	}
}

// A rolling update driven step by step must end with exactly the desired
// number of new pods and never drop below the availability floor.
func TestRollingUpdateConvergesWithinBounds(t *testing.T) {
	rt := testRT(5) // defaults: surge 2, unavailable 1
	pods := nPods("old", "h1", 5)
	next := 0
	for step := 0; step < 50; step++ {
		p := computePlan(rt, pods, "h2", t0)
		if p.create == 0 && len(p.delete) == 0 {
			break
		}
		pods = slices.DeleteFunc(pods, func(x *corev1.Pod) bool { return slices.Contains(p.delete, x) })
		for range p.create {
			pods = append(pods, testPod("new"+string(rune('a'+next)), "h2", 100+next))
			next++
		}
		if len(pods) > 5+2 {
			t.Fatalf("step %d: %d pods, above replicas+maxSurge", step, len(pods))
		}
		if ready := countAvailable(pods, 0, t0); ready < 5-1 {
			t.Fatalf("step %d: %d available, below replicas-maxUnavailable", step, ready)
		}
	}
	s := classify(pods, "h2")
	if len(s.current) != 5 || len(s.old) != 0 {
		t.Fatalf("end: %d current %d old, want 5 and 0", len(s.current), len(s.old))
	}
}

func TestTemplateHashChangesWithTemplate(t *testing.T) {
	a, b := testRT(1), testRT(1)
	b.Spec.Template.Spec.Containers[0].Image = "img:2"
	ha, err1 := TemplateHash(&a.Spec.Template)
	hb, err2 := TemplateHash(&b.Spec.Template)
	ha2, err3 := TemplateHash(&testRT(7).Spec.Template)
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatal(err1, err2, err3)
	}
	if ha == hb || ha != ha2 {
		t.Fatalf("hash(a)=%s hash(b)=%s hash(a again)=%s: want stable and template-sensitive", ha, hb, ha2)
	}
}
