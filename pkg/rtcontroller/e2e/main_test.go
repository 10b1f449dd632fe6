package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/localcluster"
	"gantry.dev/gantry/pkg/rtclient"
	"gantry.dev/gantry/pkg/rtcontroller"
	"gantry.dev/gantry/pkg/rtqueue"
)

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunMain(m, localcluster.Options{Nodes: 2, Scheduler: true, ControllerManager: true}))
}

// env is what every test needs: clients on the shared cluster with the CRD
// installed, and a fresh namespace.
type env struct {
	cfg  *rest.Config
	kube kubernetes.Interface
	rts  *rtclient.Clients
	ns   string
}

func setup(t *testing.T) *env {
	t.Helper()
	cluster := localcluster.Shared(t)
	cfg := cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e2etest.InstallCRD(t, dyn)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := rtclient.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	rts, err := rtclient.New(cfg, scheme)
	if err != nil {
		t.Fatal(err)
	}
	return &env{cfg: cfg, kube: kube, rts: rts, ns: e2etest.Namespace(t, kube)}
}

type ctrlOpts struct {
	queue string
	pool  rtqueue.PoolConfig
	qps   float32
	burst int
	reg   prometheus.Registerer
}

// running is an in-process controller the test can stop.
type running struct {
	c      *rtcontroller.Controller
	engine rtcontroller.Engine
	cancel context.CancelFunc
	done   chan error
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("controller returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("controller did not stop")
	}
}

func (e *env) newController(t *testing.T, o ctrlOpts) *rtcontroller.Controller {
	c, _ := e.newControllerAndEngine(t, o)
	return c
}

func (e *env) newControllerAndEngine(t *testing.T, o ctrlOpts) (*rtcontroller.Controller, rtcontroller.Engine) {
	t.Helper()
	if o.queue == "" {
		o.queue = rtcontroller.QueueRT
	}
	if o.pool == (rtqueue.PoolConfig{}) {
		o.pool = rtqueue.PoolConfig{Min: 4, Max: 8, IdleThreshold: 2, Reserve: 1, ReserveFloor: 50}
	}
	engine, err := rtcontroller.NewEngine(o.queue, 1, o.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rtcontroller.New(rtcontroller.Options{
		Config: e.cfg, Namespace: e.ns, Engine: engine, QPS: o.qps, Burst: o.burst,
		Component: "gantry-e2e", Registerer: o.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, engine
}

// startController runs a controller for the test's namespace until the test
// ends or stop is called.
func (e *env) startController(t *testing.T, o ctrlOpts) *running {
	t.Helper()
	c, engine := e.newControllerAndEngine(t, o)
	r := e.run(t, c, func(ctx context.Context) error { return c.Run(ctx) })
	r.engine = engine
	return r
}

func (e *env) run(t *testing.T, c *rtcontroller.Controller, f func(context.Context) error) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f(ctx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-r.done
		}
	})
	origCancel := r.cancel
	r.cancel = func() { stopped = true; origCancel() }
	return r
}

// newRT is a valid RTResource of the given size and criticality.
func (e *env) newRT(name string, replicas int32, criticality int32) *gantryv1.RTResource {
	labels := map[string]string{"app": name}
	return &gantryv1.RTResource{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: gantryv1.RTResourceSpec{
			Replicas:    ptr.To(replicas),
			Criticality: ptr.To(criticality),
			Selector:    gantryv1.LabelSelector{MatchLabels: map[string]gantryv1.LabelValue{"app": gantryv1.LabelValue(name)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "fn", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
}

func (e *env) create(t *testing.T, rt *gantryv1.RTResource) *gantryv1.RTResource {
	t.Helper()
	out, err := e.rts.Namespace(e.ns).Create(context.Background(), rt, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", rt.Name, err)
	}
	return out
}

func (e *env) get(t *testing.T, name string) *gantryv1.RTResource {
	t.Helper()
	rt, err := e.rts.Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return rt
}

// ownedPods lists every pod the RTResource controls, terminating ones too.
func (e *env) ownedPods(ctx context.Context, rt *gantryv1.RTResource) ([]corev1.Pod, error) {
	list, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == rt.UID {
			out = append(out, p)
		}
	}
	return out, nil
}

func isLive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded
}

func isRunningReady(p *corev1.Pod) bool {
	if !isLive(p) || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitReady waits until rt has exactly n live pods, all Running and Ready,
// all of the current template, and reports Ready=True for its generation.
func (e *env) waitReady(t *testing.T, name string, n int) *gantryv1.RTResource {
	t.Helper()
	var rt *gantryv1.RTResource
	e2etest.Eventually(t, fmt.Sprintf("%s to have %d ready pods", name, n), func(ctx context.Context) (bool, error) {
		var err error
		rt, err = e.rts.Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := e.ownedPods(ctx, rt)
		if err != nil {
			return false, err
		}
		live, ready := 0, 0
		for i := range pods {
			if isLive(&pods[i]) {
				live++
			}
			if isRunningReady(&pods[i]) {
				ready++
			}
		}
		st := rt.Status
		if live == n && ready == n && st.ObservedGeneration == rt.Generation &&
			st.ReadyReplicas == int32(n) && st.UpdatedReplicas == int32(n) && conditionTrue(rt, gantryv1.ConditionReady) {
			return true, nil
		}
		return false, fmt.Errorf("%d pods, %d live, %d running and ready; generation %d; status %+v",
			len(pods), live, ready, rt.Generation, st)
	})
	return rt
}

func conditionTrue(rt *gantryv1.RTResource, typ string) bool {
	for _, c := range rt.Status.Conditions {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
