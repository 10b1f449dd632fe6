package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kwokNodeAnnotation marks the nodes kwok manages.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// NodeName is the name of the i-th kwok node (from 0).
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// writeKwokConfig concatenates the cached kwok stages into kwok.yaml, setting
// the pod-ready stage's delay to Options.PodReadyDelay.
func (c *Cluster) writeKwokConfig() error {
	var out bytes.Buffer
	for _, name := range stageFiles {
		data, err := os.ReadFile(filepath.Join(CacheDir(), "stages", name))
		if err != nil {
			return err
		}
		if name == "pod-ready.yaml" && c.opts.PodReadyDelay > 0 {
			if data, err = withDelay(data, c.opts.PodReadyDelay.Milliseconds()); err != nil {
				return fmt.Errorf("kwok stage %s: %w", name, err)
			}
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	if err := os.MkdirAll(c.path("kwok"), 0o700); err != nil {
		return err
	}
	return writeFile(c.path("kwok.yaml"), out.Bytes())
}

// withDelay sets spec.delay.durationMilliseconds in a kwok Stage.
func withDelay(stage []byte, ms int64) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(stage, &obj); err != nil {
		return nil, err
	}
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("no spec")
	}
	spec["delay"] = map[string]any{"durationMilliseconds": ms}
	return yaml.Marshal(obj)
}

// createNodes creates the fake nodes with their capacity; kwok's
// node-initialize stage then marks them Ready.
func (c *Cluster) createNodes(ctx context.Context) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(c.opts.NodeCPU),
		corev1.ResourceMemory: resource.MustParse(c.opts.NodeMemory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(c.opts.NodePods), resource.DecimalSI),
	}
	for i := range c.opts.Nodes {
		name := NodeName(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{kwokNodeAnnotation: "fake"},
				Labels: map[string]string{
					"type": "kwok", "kubernetes.io/hostname": name,
					"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	return nil
}

// nodesReady succeeds once every node is Ready and, when the controller
// manager runs, has lost the not-ready taint, so the scheduler will use it.
func (c *Cluster) nodesReady(ctx context.Context) error {
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes.Items {
		if nodeReady(&n) && !(c.opts.ControllerManager && hasNotReadyTaint(&n)) {
			ready++
		}
	}
	if want := c.opts.Nodes + c.opts.ProcessNodes; ready < want {
		return fmt.Errorf("%d of %d nodes ready: %w", ready, want, errNotReady)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasNotReadyTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady {
			return true
		}
	}
	return false
}

// defaultServiceAccount succeeds once the controller manager has created
// default/default, which the ServiceAccount admission plugin needs for pods.
func (c *Cluster) defaultServiceAccount(ctx context.Context) error {
	_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return errNotReady
	}
	return err
}
