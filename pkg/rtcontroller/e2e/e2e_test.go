package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/rtcontroller"
	"gantry.dev/gantry/pkg/rtqueue"
)

func TestCreateReachesRunningAndReady(t *testing.T) {
	e := setup(t)
	reg := prometheus.NewRegistry()
	r := e.startController(t, ctrlOpts{reg: reg})
	created := e.create(t, e.newRT("web", 3, 10))
	rt := e.waitReady(t, "web", 3)
	if !r.c.IsLeader() {
		t.Error("a controller running without leader election reconciles but reports itself a standby")
	}
	// Every criticality is critical at the default floor: the status
	// writes and pod creates went over the worker's own connection, through
	// TLS, authentication and RBAC as the shared one does.
	if n := counterValue(t, reg, "gantry_rtcontroller_api_requests_total", "connection", "thread"); n < 4 {
		t.Errorf("%v critical requests over the thread transport, want the status writes and 3 creates", n)
	}

	if rt.Status.Selector != "app=web" || rt.Status.Criticality != 10 {
		t.Errorf("status selector %q criticality %d, want app=web and 10", rt.Status.Selector, rt.Status.Criticality)
	}
	pods, err := e.ownedPods(context.Background(), created)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if p.GenerateName != "web-" || ref == nil || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s: generateName %q controllerRef %+v, want web- and a blocking controller reference", p.Name, p.GenerateName, ref)
		}
	}
	e2etest.Eventually(t, "a SuccessfulCreate event", func(ctx context.Context) (bool, error) {
		evs, err := e.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.UID == created.UID && ev.Reason == rtcontroller.EventCreated {
				return true, nil
			}
		}
		return false, nil
	})
}

// A pod the apiserver rejects surfaces as a Warning Event on the owner, and
// the object reports that it is not ready and why (ReplicaFailure), instead
// of crashing or going quiet.
func TestRejectedPodCreateIsReportedAsEventAndReplicaFailure(t *testing.T) {
	e := setup(t)
	e.startController(t, ctrlOpts{})
	rt := e.newRT("broken", 1, 10)
	rt.Spec.Template.Spec.Containers[0].Name = "Not_A_DNS_Label"
	created := e.create(t, rt)
	e2etest.Eventually(t, "a FailedCreate event", func(ctx context.Context) (bool, error) {
		evs, err := e.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.UID == created.UID && ev.Reason == rtcontroller.EventFailedCreate && ev.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, nil
	})
	if got := e.get(t, "broken"); conditionTrue(got, gantryv1.ConditionReady) {
		t.Fatalf("status %+v: Ready with no pod", got.Status)
	}
	// The status says why, as a ReplicaSet's does.
	e2etest.Eventually(t, "ReplicaFailure=True (FailedCreate) in the status", func(ctx context.Context) (bool, error) {
		got, err := e.rts.Namespace(e.ns).Get(ctx, "broken", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, gantryv1.ConditionReplicaFailure)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == rtcontroller.ReasonFailedCreate &&
			strings.Contains(c.Message, "Not_A_DNS_Label"), nil
	})
}

func (e *env) scaleTo(t *testing.T, name string, n int32) *autoscalingv1.Scale {
	t.Helper()
	ctx := context.Background()
	s := &autoscalingv1.Scale{}
	req := e.rts.REST().Get().Namespace(e.ns).Resource(gantryv1.Resource).Name(name).SubResource("scale")
	if err := req.Do(ctx).Into(s); err != nil {
		t.Fatalf("get scale: %v", err)
	}
	s.Spec.Replicas = n
	out := &autoscalingv1.Scale{}
	put := e.rts.REST().Put().Namespace(e.ns).Resource(gantryv1.Resource).Name(name).SubResource("scale").Body(s)
	if err := put.Do(ctx).Into(out); err != nil {
		t.Fatalf("put scale: %v", err)
	}
	return out
}

func TestScaleUpAndDownThroughScaleSubresource(t *testing.T) {
	e := setup(t)
	e.startController(t, ctrlOpts{})
	e.create(t, e.newRT("api", 1, 20))
	e.waitReady(t, "api", 1)

	s := e.scaleTo(t, "api", 4)
	if s.Status.Selector != "app=api" {
		t.Errorf("scale selector %q, want app=api (HPA and Knative read it)", s.Status.Selector)
	}
	e.waitReady(t, "api", 4)
	e.scaleTo(t, "api", 1)
	e.waitReady(t, "api", 1)
}

func TestDeletedPodIsReplaced(t *testing.T) {
	e := setup(t)
	e.startController(t, ctrlOpts{})
	rt := e.create(t, e.newRT("svc", 2, 30))
	e.waitReady(t, "svc", 2)
	victim := e.onePod(t, rt)
	if err := e.kube.CoreV1().Pods(e.ns).Delete(context.Background(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitReplaced(t, rt, victim.UID, 2)
}

func TestFailedPodIsReplaced(t *testing.T) {
	e := setup(t)
	e.startController(t, ctrlOpts{})
	rt := e.create(t, e.newRT("svc", 2, 30))
	e.waitReady(t, "svc", 2)
	victim := e.onePod(t, rt)
	victim.Status.Phase = corev1.PodFailed
	victim.Status.Reason = "Evicted"
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(context.Background(), &victim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitReplaced(t, rt, victim.UID, 2)
}

func (e *env) onePod(t *testing.T, rt *gantryv1.RTResource) corev1.Pod {
	t.Helper()
	pods, err := e.ownedPods(context.Background(), rt)
	if err != nil || len(pods) == 0 {
		t.Fatalf("owned pods: %v, %d found", err, len(pods))
	}
	return pods[0]
}

// waitReplaced waits until gone is no longer a live pod of rt and rt is back
// to n ready pods.
func (e *env) waitReplaced(t *testing.T, rt *gantryv1.RTResource, gone types.UID, n int) {
	t.Helper()
	e2etest.Eventually(t, "the pod to be replaced", func(ctx context.Context) (bool, error) {
		pods, err := e.ownedPods(ctx, rt)
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range pods {
			if pods[i].UID == gone && isLive(&pods[i]) {
				return false, nil
			}
			if pods[i].UID != gone && isRunningReady(&pods[i]) {
				ready++
			}
		}
		return ready == n, nil
	})
	e.waitReady(t, rt.Name, n)
}

func TestTemplateChangeRollsOut(t *testing.T) {
	for _, strategy := range []gantryv1.Strategy{
		{Type: gantryv1.RollingUpdateStrategy, RollingUpdate: &gantryv1.RollingUpdate{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
		{Type: gantryv1.RecreateStrategy},
	} {
		t.Run(string(strategy.Type), func(t *testing.T) {
			e := setup(t)
			e.startController(t, ctrlOpts{})
			rt := e.newRT("app", 3, 40)
			rt.Spec.Strategy = strategy
			rt = e.create(t, rt)
			e.waitReady(t, "app", 3)
			before := e.get(t, "app").Generation

			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := e.get(t, "app")
				cur.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/pause:3.9"
				_, err := e.rts.Namespace(e.ns).Update(context.Background(), cur, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			after := e.waitReady(t, "app", 3)
			if after.Generation == before {
				t.Fatal("template change did not bump the generation")
			}
			pods, err := e.ownedPods(context.Background(), rt)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				if isLive(&p) && p.Spec.Containers[0].Image != "registry.k8s.io/pause:3.9" {
					t.Errorf("live pod %s still runs %s", p.Name, p.Spec.Containers[0].Image)
				}
			}
		})
	}
}

// The reference ignored the initial list, so nothing was reconciled after a
// restart; a naive fix re-creates pods it does not know about.
func TestRestartMidwayConvergesWithoutDuplicatePods(t *testing.T) {
	e := setup(t)
	first := e.startController(t, ctrlOpts{qps: 4, burst: 1}) // slow, so the restart lands mid-way
	rt := e.create(t, e.newRT("big", 20, 50))
	e2etest.Eventually(t, "the first pods", func(ctx context.Context) (bool, error) {
		pods, err := e.ownedPods(ctx, rt)
		return len(pods) >= 3, err
	})
	first.stop(t)
	pods, err := e.ownedPods(context.Background(), rt)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) >= 20 {
		t.Fatalf("%d pods before the restart; the test needs the restart mid-way", len(pods))
	}
	t.Logf("restarting with %d of 20 pods created", len(pods))

	e.startController(t, ctrlOpts{})
	e.waitReady(t, "big", 20)
	time.Sleep(2 * time.Second) // let any duplicate create surface before counting
	pods, err = e.ownedPods(context.Background(), rt)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	if len(pods) != 20 || len(names) != 20 {
		t.Fatalf("%d pods (%d distinct names) after the restart, want exactly 20", len(pods), len(names))
	}
}

func TestLeaderElectionOneActiveAndFailoverUnder15s(t *testing.T) {
	e := setup(t)
	le := func(id string) rtcontroller.LeaderElection {
		return rtcontroller.LeaderElection{Namespace: e.ns, Name: "gantry-e2e", Identity: id}
	}
	var replicas [2]*running
	for i, id := range []string{"a", "b"} {
		c := e.newController(t, ctrlOpts{})
		replicas[i] = e.run(t, c, func(ctx context.Context) error { return c.RunLeaderElected(ctx, le(id)) })
	}
	leader := func() int {
		n, who := 0, -1
		for i, r := range replicas {
			if r.c.IsLeader() {
				n, who = n+1, i
			}
		}
		if n > 1 {
			t.Fatal("two replicas lead at once")
		}
		return who
	}
	e2etest.Eventually(t, "a leader", func(context.Context) (bool, error) { return leader() >= 0, nil })
	old := leader()
	e.create(t, e.newRT("ha", 1, 60))
	e.waitReady(t, "ha", 1)

	// A crash: the leader stops renewing without releasing its lease.
	crashed := time.Now()
	replicas[old].stop(t)
	e2etest.Eventually(t, "the standby to take over", func(context.Context) (bool, error) { return leader() == 1-old, nil })
	if took := time.Since(crashed); took >= 15*time.Second {
		t.Fatalf("failover took %v, want under 15s", took)
	} else {
		t.Logf("failover took %v", took)
	}
	e.scaleTo(t, "ha", 3)
	e.waitReady(t, "ha", 3)
}

func TestAPIServerRejectsInvalidObjects(t *testing.T) {
	e := setup(t)
	const tmpl = `"template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`
	const sel = `"selector":{"matchLabels":{"app":"x"}}`
	cases := []struct{ name, spec, want string }{
		{"criticality 150", `"criticality":150,` + sel + `,` + tmpl, "spec.criticality: Invalid value: 150: spec.criticality in body should be less than or equal to 99"},
		{"replicas -1", `"replicas":-1,` + sel + `,` + tmpl, "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"},
		{"selector does not match template", `"selector":{"matchLabels":{"app":"y"}},` + tmpl, "selector.matchLabels must match the template's labels"},
		{"expression does not match template", `"selector":{"matchExpressions":[{"key":"app","operator":"In","values":["y"]}]},` + tmpl, "selector.matchExpressions must match the template's labels"},
		{"empty selector", `"selector":{},` + tmpl, "selector must not be empty"},
		{"missing template", sel, "spec.template: Required value"},
		{"rollingUpdate with Recreate", `"strategy":{"type":"Recreate","rollingUpdate":{"maxSurge":1}},` + sel + `,` + tmpl, "rollingUpdate may only be set when type is RollingUpdate"},
		// Deployments refuse these too; each would stall or loop a rollout.
		{"maxSurge and maxUnavailable 0", `"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":"0%"}},` + sel + `,` + tmpl, "maxSurge and maxUnavailable may not both be 0"},
		{"maxSurge not a percentage", `"strategy":{"rollingUpdate":{"maxSurge":"abc"}},` + sel + `,` + tmpl, "maxSurge must be a non-negative integer or a percentage"},
		{"maxSurge negative", `"strategy":{"rollingUpdate":{"maxSurge":-1}},` + sel + `,` + tmpl, "maxSurge must be a non-negative integer or a percentage"},
		{"maxUnavailable over 100%", `"strategy":{"rollingUpdate":{"maxUnavailable":"101%"}},` + sel + `,` + tmpl, "maxUnavailable must be a non-negative integer or a percentage from 0% to 100%"},
		{"no containers", sel + `,"template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[]}}`, "template.spec.containers must name at least one container"},
		{"restartPolicy Never", sel + `,"template":{"metadata":{"labels":{"app":"x"}},"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}`, "template.spec.restartPolicy must be Always"},
		{"activeDeadlineSeconds", sel + `,"template":{"metadata":{"labels":{"app":"x"}},"spec":{"activeDeadlineSeconds":5,"containers":[{"name":"c","image":"i"}]}}`, "template.spec.activeDeadlineSeconds is not supported"},
		{"template criticality annotation not a number", sel + `,"template":{"metadata":{"labels":{"app":"x"},"annotations":{"` + gantryv1.CriticalityAnnotation + `":"high"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, "must be an integer from 0 to 99"},
		{"template criticality annotation 100", sel + `,"template":{"metadata":{"labels":{"app":"x"},"annotations":{"` + gantryv1.CriticalityAnnotation + `":"100"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`, "must be an integer from 0 to 99"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"apiVersion":"gantry.dev/v1alpha1","kind":"RTResource","metadata":{"name":"bad"},"spec":{` + tc.spec + `}}`
			err := e.rts.REST().Post().Namespace(e.ns).Resource(gantryv1.Resource).
				SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create = %v\nwant Invalid containing %q", err, tc.want)
			}
		})
	}
	// The CEL rules must not reject what they are meant to admit.
	t.Run("matching expressions of every operator are accepted", func(t *testing.T) {
		rt := e.newRT("exprs", 0, 1)
		rt.Spec.Template.Labels["tier"] = "web"
		rt.Spec.Selector = gantryv1.LabelSelector{
			MatchLabels: map[string]gantryv1.LabelValue{"app": "exprs"},
			MatchExpressions: []gantryv1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}},
				{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"batch"}},
				{Key: "app", Operator: metav1.LabelSelectorOpExists},
				{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
			},
		}
		e.create(t, rt)
	})
	t.Run("rollout bounds, restartPolicy and annotation in range are accepted", func(t *testing.T) {
		rt := e.newRT("bounds", 0, 1)
		surge, unavailable := intstr.FromString("100%"), intstr.FromInt32(0)
		rt.Spec.Strategy.RollingUpdate = &gantryv1.RollingUpdate{MaxSurge: &surge, MaxUnavailable: &unavailable}
		rt.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		rt.Spec.Template.Annotations = map[string]string{gantryv1.CriticalityAnnotation: " 07 "}
		e.create(t, rt)
	})
	t.Run("selector change", func(t *testing.T) {
		rt := e.create(t, e.newRT("fixed", 0, 1))
		rt.Spec.Selector.MatchLabels["tier"] = "x"
		rt.Spec.Template.Labels["tier"] = "x"
		_, err := e.rts.Namespace(e.ns).Update(context.Background(), rt, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "selector is immutable") {
			t.Fatalf("update = %v, want Invalid: selector is immutable", err)
		}
	})
}

// failingEngine is an engine whose workers die at once.
type failingEngine struct{ rtcontroller.Engine }

var errWorkersDied = errors.New("workers died")

func (failingEngine) Run(context.Context, rtcontroller.Handler) error { return errWorkersDied }

// A leader that cannot reconcile must not sit on the lease: it returns the
// engine's error and releases, so a standby takes over.
func TestLeaderWhoseEngineFailsGivesTheLeaseUp(t *testing.T) {
	e := setup(t)
	le := rtcontroller.LeaderElection{Namespace: e.ns, Name: "gantry-e2e", Identity: "broken", ReleaseOnCancel: true}
	engine, err := rtcontroller.NewEngine(rtcontroller.QueueFIFO, 1, rtqueue.PoolConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rtcontroller.New(rtcontroller.Options{Config: e.cfg, Namespace: e.ns, Engine: failingEngine{engine}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = c.RunLeaderElected(ctx, le)
	if ctx.Err() != nil {
		t.Fatal("RunLeaderElected hung until its context ended")
	}
	if !errors.Is(err, rtcontroller.ErrEngineStopped) || !errors.Is(err, errWorkersDied) {
		t.Fatalf("RunLeaderElected = %v, want ErrEngineStopped wrapping the engine's error", err)
	}
	lease, err := e.kube.CoordinationV1().Leases(e.ns).Get(context.Background(), "gantry-e2e", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h == "broken" {
		t.Fatalf("the failed leader still holds the lease")
	}
}

// Without leader election too, an engine that dies must end Run with its
// error rather than leave the process hanging in shutdown.
func TestRunReturnsTheErrorOfAnEngineThatDies(t *testing.T) {
	e := setup(t)
	engine, err := rtcontroller.NewEngine(rtcontroller.QueueFIFO, 1, rtqueue.PoolConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rtcontroller.New(rtcontroller.Options{Config: e.cfg, Namespace: e.ns, Engine: failingEngine{engine}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if ctx.Err() != nil {
		t.Fatal("Run hung until its context ended")
	}
	if !errors.Is(err, errWorkersDied) {
		t.Fatalf("Run = %v, want the engine's error", err)
	}
}

// counterValue reads one labelled counter from reg.
func counterValue(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabel(m, label, value) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, label, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == label && l.GetValue() == value {
			return true
		}
	}
	return false
}
