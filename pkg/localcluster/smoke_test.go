package localcluster

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/e2etest"
)

// The smoke end-to-end tests: real kube-apiserver, kube-scheduler and
// kube-controller-manager, with kwok as the kubelets.

func TestBarePodBoundToAKwokNodeRuns(t *testing.T) {
	client, ns := newTestNamespace(t, Shared(t))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bare"},
		Spec: corev1.PodSpec{
			NodeName:   NodeName(0),
			Containers: []corev1.Container{{Name: "app", Image: "gantry.invalid/app"}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, "pod bare Running and Ready", func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "bare", metav1.GetOptions{})
		return err == nil && podRunningAndReady(p), err
	})
}

func TestDeploymentPodsAreScheduledAndRunThroughTheRealControllers(t *testing.T) {
	client, ns := newTestNamespace(t, Shared(t))
	labels := map[string]string{"app": "smoke"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "gantry.invalid/app"}}},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, "3 ready replicas", func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, "smoke", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 3, err
	})
	pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=smoke"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !podRunningAndReady(&p) || !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") {
			t.Errorf("pod %s: phase %s on node %q, want Running and Ready on a kwok node", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
}

// newTestNamespace creates a namespace for one test, deleted when it ends,
// and waits for its default service account, which pods need.
func newTestNamespace(t *testing.T, c *Cluster) (kubernetes.Interface, string) {
	t.Helper()
	client := kubernetes.NewForConfigOrDie(c.RESTConfig())
	return client, e2etest.Namespace(t, client)
}

func podRunningAndReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
