package rtcontroller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testRT(replicas int32) *gantryv1.RTResource {
	return &gantryv1.RTResource{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc", UID: "rt-uid", Generation: 1},
		Spec: gantryv1.RTResourceSpec{
			Replicas: ptr.To(replicas),
			Selector: gantryv1.LabelSelector{MatchLabels: map[string]gantryv1.LabelValue{"app": "svc"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "svc"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}},
			},
		},
	}
}

type podOpt func(*corev1.Pod)

// testPod is a scheduled, running, ready pod of template hash h created at
// t0 + age seconds.
func testPod(name, h string, age int, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second)),
			Labels:            map[string]string{gantryv1.TemplateHashLabel: h},
		},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func pending(p *corev1.Pod) {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions[0].Status = corev1.ConditionFalse
}
func unscheduled(p *corev1.Pod) { pending(p); p.Spec.NodeName = "" }
func failed(p *corev1.Pod)      { p.Status.Phase = corev1.PodFailed; notReady(p) }
func succeeded(p *corev1.Pod)   { p.Status.Phase = corev1.PodSucceeded; notReady(p) }
func terminating(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }

func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func nPods(prefix, h string, n int, opts ...podOpt) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range n {
		out[i] = testPod(fmt.Sprintf("%s%d", prefix, i), h, i, opts...)
	}
	return out
}
