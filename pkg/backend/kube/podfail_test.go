package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podFailure names each reason a pod will not become ready, and nothing
// for a pod that is merely still starting.
func TestPodFailureNamesWhyAPodWillNotBecomeReady(t *testing.T) {
	withStatus := func(cs corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"starting", withStatus(corev1.ContainerStatus{Name: "function",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}), nil},
		{"crash loop", withStatus(corev1.ContainerStatus{Name: "function", RestartCount: 4,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}),
			[]string{"CrashLoopBackOff: back-off 40s", "last terminated with exit code 3 (Error)", "restarts 4"}},
		{"image pull", withStatus(corev1.ContainerStatus{Name: "function",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}}),
			[]string{"ImagePullBackOff: not found"}},
		{"unschedulable", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes available"}}}},
			[]string{"unschedulable: 0/1 nodes available"}},
	}
	for _, c := range cases {
		got := podFailure(c.pod)
		if (got == "") != (c.want == nil) {
			t.Errorf("%s: %q", c.name, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
	}
}
