package orchbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"gantry.dev/gantry/config/crd"
	"gantry.dev/gantry/pkg/localcluster"
)

// knativeShapedTemplate is a Revision's pod template as Knative writes it
// into its Deployment (and Gantry into the RTResource): the user container
// and queue-proxy with its 27 variables, ports and an HTTP probe.
func knativeShapedTemplate(name string) corev1.PodTemplateSpec {
	lbl := map[string]string{"app": name, "serving.knative.dev/revision": name}
	var env []corev1.EnvVar
	for i := range 27 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("QUEUE_PROXY_SETTING_%02d", i), Value: strings.Repeat("v", 24)})
	}
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("25m")}}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl, Annotations: map[string]string{"autoscaling.knative.dev/application-criticality-level": "5"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "user-container", Image: "dev.local/gantry-fn:sentiment", Resources: res,
				Ports: []corev1.ContainerPort{{Name: "user-port", ContainerPort: 8080}},
				Env:   []corev1.EnvVar{{Name: "PORT", Value: "8080"}, {Name: "K_REVISION", Value: name}, {Name: "K_CONFIGURATION", Value: name}, {Name: "K_SERVICE", Value: name}}},
			{Name: "queue-proxy", Image: "ko://knative.dev/serving/cmd/queue", Env: env, Resources: res,
				Ports: []corev1.ContainerPort{{Name: "http-queueadm", ContainerPort: 8022}, {Name: "http-autometric", ContainerPort: 9090}, {Name: "http-usermetric", ContainerPort: 9091}, {Name: "queue-port", ContainerPort: 8012}, {Name: "https-port", ContainerPort: 8112}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8012),
					HTTPHeaders: []corev1.HTTPHeader{{Name: "K-Network-Probe", Value: "queue"}}}}}},
		}},
	}
}

// BenchmarkAPIServerWrites times, on the test binary's local control
// plane, the writes a scale-up makes in each arm of the Knative run, with
// a Knative-shaped pod template: the KPA's /scale patch of a Deployment
// and of an RTResource, the deployment controller's ReplicaSet write
// (protobuf) and Gantry's RTResource status write (JSON, a custom
// resource), each RTResource write also on a copy of the CRD without its
// x-kubernetes-validations (CEL) rules and on one without them whose pod
// template is schemaless, so that the cost of each shows.
//
//	go test -run '^$' -bench APIServerWrites -benchtime 200x ./pkg/orchbench
func BenchmarkAPIServerWrites(b *testing.B) {
	cluster := localcluster.Shared(b)
	ctx := context.Background()
	cfg := cluster.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = runtime.ContentTypeProtobuf
	kube := kubernetes.NewForConfigOrDie(pcfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	disco := kubernetes.NewForConfigOrDie(cfg).Discovery().RESTClient()
	if err := crd.Install(ctx, dyn, nil); err != nil {
		b.Fatal(err)
	}
	if err := crd.Install(ctx, dyn, crdVariant(b, crd.RTResource, "nocel.gantry.dev", false)); err != nil {
		b.Fatal(err)
	}
	if err := crd.Install(ctx, dyn, crdVariant(b, crd.RTResource, "schemaless.gantry.dev", true)); err != nil {
		b.Fatal(err)
	}
	const ns = "default"
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e6)
	tpl := knativeShapedTemplate(name)
	sel := &metav1.LabelSelector{MatchLabels: tpl.Labels}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: tpl}}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: tpl}}
	if _, err := kube.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = kube.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = kube.AppsV1().ReplicaSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	rtGVR := map[string]schema.GroupVersionResource{}
	for _, group := range []string{"gantry.dev", "nocel.gantry.dev", "schemaless.gantry.dev"} {
		gvr := schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "rtresources"}
		rtGVR[group] = gvr
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: tpl})
		if err != nil {
			b.Fatal(err)
		}
		delete(u, "strategy")
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1alpha1", "kind": "RTResource",
			"metadata": map[string]any{"name": name}, "spec": u}}
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create the %s RTResource: %v", group, err)
		}
		b.Cleanup(func() { _ = dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	scale := func(gvr schema.GroupVersionResource) func(int) error {
		return func(i int) error {
			patch := fmt.Appendf(nil, `[{"op":"replace","path":"/spec/replicas","value":%d}]`, i%2)
			_, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "autoscaler"}, "scale")
			return err
		}
	}
	status := func(gvr schema.GroupVersionResource) func(int) error {
		return func(i int) error {
			obj, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cond := map[string]any{"type": "Progressing", "status": "True", "reason": "Processing", "message": fmt.Sprintf("generation %d", i),
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
			obj.Object["status"] = map[string]any{"observedGeneration": int64(i), "conditions": []any{cond}}
			_, err = dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
			return err
		}
	}
	// statusPut is the controller's status write as it makes it: a PUT of
	// the object it holds (its cache's, or the last write's answer), no
	// GET. statusPatch sends only the status, as a JSON patch that keeps
	// the PUT's optimistic concurrency (the resourceVersion it read).
	statusOf := func(i int) map[string]any {
		cond := map[string]any{"type": "Progressing", "status": "True", "reason": "Processing", "message": fmt.Sprintf("generation %d", i),
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		return map[string]any{"observedGeneration": int64(i), "conditions": []any{cond}}
	}
	statusPut := func(gvr schema.GroupVersionResource) func(int) error {
		var held *unstructured.Unstructured
		return func(i int) error {
			if held == nil {
				obj, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				held = obj
			}
			held.Object["status"] = statusOf(i)
			out, err := dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctx, held, metav1.UpdateOptions{})
			held = out
			return err
		}
	}
	statusPatch := func(gvr schema.GroupVersionResource) func(int) error {
		rv := ""
		return func(i int) error {
			if rv == "" {
				obj, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				rv = obj.GetResourceVersion()
			}
			patch, err := json.Marshal([]map[string]any{
				{"op": "add", "path": "/metadata/resourceVersion", "value": rv},
				{"op": "add", "path": "/status", "value": statusOf(i)}})
			if err != nil {
				return err
			}
			out, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
			if err != nil {
				return err
			}
			rv = out.GetResourceVersion()
			return nil
		}
	}
	// toWatch is a /scale patch timed until a watch of the object (as
	// the controllers' informers watch) delivers it: the API server's
	// commit, its watch cache and the event's encoding and decoding.
	// delivered sums, per sub-benchmark, the time from the patch's send to
	// the event's arrival (reported as ms-to-watch/op), leaving out the
	// GET and the watch's start that the loop also times.
	var delivered time.Duration
	toWatch := func(gvr schema.GroupVersionResource) func(int) error {
		return func(i int) error {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			cur, err := dyn.Resource(gvr).Namespace(ns).Get(wctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			wi, err := dyn.Resource(gvr).Namespace(ns).Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cur.GetResourceVersion()})
			if err != nil {
				return err
			}
			defer wi.Stop()
			sent := time.Now()
			defer func() { delivered += time.Since(sent) }()
			if err := scale(gvr)(i); err != nil {
				return err
			}
			for ev := range wi.ResultChan() {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); r == int64(i%2) {
						return nil
					}
				}
			}
			return fmt.Errorf("the watch ended before the write arrived: %w", wctx.Err())
		}
	}
	for _, w := range []struct {
		name  string
		write func(int) error
	}{
		{"deployments-scale-patch-to-watch", toWatch(appsv1.SchemeGroupVersion.WithResource("deployments"))},
		{"rtresources-scale-patch-to-watch", toWatch(rtGVR["gantry.dev"])},
		{"deployments-scale-patch", scale(appsv1.SchemeGroupVersion.WithResource("deployments"))},
		{"rtresources-scale-patch", scale(rtGVR["gantry.dev"])},
		{"rtresources-scale-patch-nocel", scale(rtGVR["nocel.gantry.dev"])},
		{"rtresources-scale-patch-nocel-schemaless-template", scale(rtGVR["schemaless.gantry.dev"])},
		{"replicasets-update-protobuf", func(i int) error {
			// KCM's replicaset controller writes the object's status
			// meanwhile: retry a conflict, as the deployment controller does.
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := kube.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Annotations = map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(i)}
				_, err = kube.AppsV1().ReplicaSets(ns).Update(ctx, cur, metav1.UpdateOptions{})
				return err
			})
		}},
		{"rtresources-status-update", status(rtGVR["gantry.dev"])},
		{"rtresources-status-update-nocel", status(rtGVR["nocel.gantry.dev"])},
		{"rtresources-status-update-nocel-schemaless-template", status(rtGVR["schemaless.gantry.dev"])},
		{"rtresources-status-put-noget", statusPut(rtGVR["gantry.dev"])},
		{"rtresources-status-put-noget-nocel-schemaless-template", statusPut(rtGVR["schemaless.gantry.dev"])},
		{"rtresources-status-json-patch", statusPatch(rtGVR["gantry.dev"])},
	} {
		b.Run(w.name, func(b *testing.B) {
			delivered = 0
			n := 0
			cpu0 := apiserverCPU(b, disco)
			for i := 0; b.Loop(); i++ {
				if err := w.write(i); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.StopTimer()
			// The API server's CPU per write, which on a loaded machine
			// is what a write waits for; it includes what the write sets
			// off in the API server (watch events; for the Deployment,
			// the deployment controller's and scheduler's follow-up
			// writes, since the control plane runs kube-controller-manager).
			b.ReportMetric((apiserverCPU(b, disco)-cpu0)*1000/float64(n), "apiserver-cpu-ms/op")
			if delivered > 0 {
				b.ReportMetric(float64(delivered.Microseconds())/1000/float64(n), "ms-to-watch/op")
			}
		})
	}
}

// apiserverCPU is the API server's process_cpu_seconds_total.
func apiserverCPU(b *testing.B, rc rest.Interface) float64 {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("the API server's /metrics: %v", err)
	}
	cpu := -1.0
	if err := eachSeries(bytes.NewReader(raw), func(name string, _ map[string]string, v float64) {
		if name == "process_cpu_seconds_total" {
			cpu = v
		}
	}); err != nil {
		b.Fatal(err)
	}
	if cpu < 0 {
		b.Fatal("the API server's /metrics has no process_cpu_seconds_total")
	}
	return cpu
}

// crdVariant is the CRD under another group with every
// x-kubernetes-validations (CEL) rule removed and, with schemalessTemplate,
// spec.template's schema (the pod template, most of the CRD's 640 KB)
// replaced by x-kubernetes-preserve-unknown-fields, so the benchmark tells
// CEL, the template's schema (pruning, validation) and what is left (JSON)
// apart. The shipped CRD is not touched.
func crdVariant(b *testing.B, manifest []byte, group string, schemalessTemplate bool) []byte {
	var obj map[string]any
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		b.Fatal(err)
	}
	var strip func(any)
	strip = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			delete(t, "x-kubernetes-validations")
			for _, x := range t {
				strip(x)
			}
		case []any:
			for _, x := range t {
				strip(x)
			}
		}
	}
	strip(obj)
	spec := obj["spec"].(map[string]any)
	if schemalessTemplate {
		for _, v := range spec["versions"].([]any) {
			props := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)
			tplProps := props["spec"].(map[string]any)["properties"].(map[string]any)
			tplProps["template"] = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		}
	}
	names := spec["names"].(map[string]any)
	obj["metadata"].(map[string]any)["name"] = names["plural"].(string) + "." + group
	spec["group"] = group
	out, err := yaml.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	return out
}
