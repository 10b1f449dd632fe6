package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"gantry.dev/gantry/pkg/localcluster"
	"gantry.dev/gantry/pkg/processnode"
)

// A process node beside a kwok node in one cluster: each runs the pods the
// scheduler puts on it, and kwok leaves the process node alone (it manages
// only the nodes annotated as its own).
func TestProcessNodeBesideAKwokNode(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 1, ProcessNodes: 1, Scheduler: true, ControllerManager: true,
		Programs: map[string]string{program: self}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	kc, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name, nodeType string, command []string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"type": nodeType},
				Containers: []corev1.Container{{Name: "c", Image: "example.invalid/x:1", Command: command,
					Env: []corev1.EnvVar{{Name: instanceEnv, Value: "1"}, {Name: "PORT", Value: strconv.Itoa(int(port))},
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}}},
			},
		}
	}
	for _, p := range []*corev1.Pod{pod("real", processnode.TypeValue, []string{program}), pod("fake", "kwok", nil)} {
		if _, err := kc.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running := func(name string) *corev1.Pod {
		t.Helper()
		var got *corev1.Pod
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			p, err := kc.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got = p
			return p.Status.Phase == corev1.PodRunning && podReady(p), nil
		})
		if err != nil {
			t.Fatalf("pod %s not running and ready: %v (last %+v)", name, err, got)
		}
		return got
	}
	real, fake := running("real"), running("fake")
	if real.Spec.NodeName != localcluster.ProcessNodeName(0) || fake.Spec.NodeName != localcluster.NodeName(0) {
		t.Errorf("pods on %s and %s", real.Spec.NodeName, fake.Spec.NodeName)
	}
	if id := real.Status.ContainerStatuses[0].ContainerID; !strings.HasPrefix(id, "process://") {
		t.Errorf("the process node's pod has container ID %q, want a process", id)
	}
	if pid, err := pid(real); err != nil || !alive(pid) {
		t.Errorf("the process node's pod's process: %d, %v", pid, err)
	}
	if len(fake.Status.ContainerStatuses) > 0 && strings.HasPrefix(fake.Status.ContainerStatuses[0].ContainerID, "process://") {
		t.Errorf("the kwok node's pod runs as a process")
	}
	n, err := kc.CoreV1().Nodes().Get(ctx, localcluster.ProcessNodeName(0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, kwok := n.Annotations["kwok.x-k8s.io/node"]; kwok {
		t.Errorf("the process node carries kwok's annotation")
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && (cond.Status != corev1.ConditionTrue || cond.Reason != "KubeletReady") {
			t.Errorf("process node Ready condition %+v, want virtual-kubelet's KubeletReady", cond)
		}
	}
}
