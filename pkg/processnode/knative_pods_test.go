package processnode_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A pod shaped like Knative's on a process node in the real control plane:
// client-go's in-cluster config gets the pod itself (the projected
// service-account token, kube-root-ca.crt and namespace at their
// mountPath, KUBERNETES_SERVICE_HOST/PORT, the API relay); config map,
// secret, downward-API and emptyDir volumes are at their mountPaths,
// read-only where a kubelet makes them so; the downward API fills env; a
// Service's name resolves, through the pod's hosts file, to its ClusterIP,
// where the node's service proxy forwards to a pod that became ready (by an
// HTTP probe with Knative's K-Network-Probe header) after the first pod had
// started.
func TestKnativeShapedPod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc := startNamespacedCluster(ctx, t, "helper", "gantry")
	const ns = "kn"
	create := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("creating %s: %v", what, err)
		}
	}
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	create("namespace", err)
	waitUntil(t, ctx, "the namespace's default service account", func() bool {
		_, err := kc.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	om := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: om("cfg"), Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{})
	create("config map", err)
	_, err = kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: om("sec"), Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{})
	create("secret", err)
	_, err = kc.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: om("read-pods"),
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	create("role", err)
	_, err = kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: om("read-pods"),
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-pods"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}}}, metav1.CreateOptions{})
	create("role binding", err)
	_, err = kc.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: om("backend"), Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "backend"},
		Ports:    []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	create("service", err)

	// The mount points are made under a folder of the test's, which goes
	// with it; the node creates the ones that do not exist.
	mnt := t.TempDir()
	if err := os.Mkdir(filepath.Join(mnt, "cfg"), 0o755); err != nil {
		t.Fatal(err)
	}
	client := clientPod(ns, mnt)
	_, err = kc.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{})
	create("client pod", err)
	// The backend comes after the client runs, so the client's hosts file
	// names it only once refreshed.
	waitUntil(t, ctx, "the client pod running", func() bool {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		return err == nil && p.Status.Phase != corev1.PodPending
	})
	_, err = kc.CoreV1().Pods(ns).Create(ctx, backendPod(ns), metav1.CreateOptions{})
	create("backend pod", err)

	// An image dev.local/gantry-fn:NAME runs `gantry fn NAME` on $PORT.
	_, err = kc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: om("fn"), Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "user-container", Image: "dev.local/gantry-fn:echo",
			Env: []corev1.EnvVar{{Name: "PROCESSNODE_TEST_HELPER", Value: "args"}}}}}}, metav1.CreateOptions{})
	create("gantry-fn pod", err)

	var pod *corev1.Pod
	waitUntil(t, ctx, "the client pod done", func() bool {
		pod, err = kc.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		return err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)
	})
	raw, err := kc.CoreV1().Pods(ns).GetLogs("client", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logs := string(raw)
	backendSvc, err := kc.CoreV1().Services(ns).Get(ctx, "backend", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"own pod uid: " + string(pod.UID),
		`file cfg/greeting: "hello" <nil>`,
		`file sec/password: "hunter2" <nil>`,
		`file podinfo/labels: "app=\"client\"\ntier=\"kn\"" <nil>`,
		`file podinfo/cpu-limit: "250" <nil>`,
		"write cfg: erofs=true ok=false",
		"write scratch: erofs=false ok=true",
		"env POD_NAME: client\n", "env POD_NAMESPACE: kn\n", "env POD_UID: " + string(pod.UID) + "\n",
		"env POD_IP: " + pod.Status.PodIP + "\n", "env POD_IPS: " + pod.Status.PodIP + "\n",
		"env HOST_IP: " + pod.Status.HostIP + "\n", "env NODE_NAME: " + pod.Spec.NodeName + "\n",
		"env SA_NAME: default\n", "env LABEL_APP: client\n", "env ANNOTATION_NOTE: shaped like Knative's\n",
		"env MEM_REQUEST_MI: 64\n",
		"resolve backend.kn.svc.cluster.local: [" + backendSvc.Spec.ClusterIP + "] <nil>",
		`fetch: 200 {"cwd"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the client's log lacks %q", want)
		}
	}
	if pod.Status.Phase != corev1.PodSucceeded || t.Failed() {
		t.Fatalf("client pod %s; its log:\n%s", pod.Status.Phase, logs)
	}
	if !strings.HasPrefix(pod.Status.HostIP, "198.18.") || pod.Status.Message != "" {
		t.Errorf("host IP %q, message %q", pod.Status.HostIP, pod.Status.Message)
	}

	waitUntil(t, ctx, "the gantry-fn pod done", func() bool {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, "fn", metav1.GetOptions{})
		return err == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	raw, err = kc.CoreV1().Pods(ns).GetLogs("fn", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := `args ["fn" "echo" "--addr" ":8080"] PORT=8080`; !strings.Contains(string(raw), want) {
		t.Errorf("the gantry-fn pod's log lacks %q:\n%s", want, raw)
	}
}

func waitUntil(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within the test's time", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// clientPod runs the helper's in-cluster checks once.
func clientPod(ns, mnt string) *corev1.Pod {
	mi := resource.MustParse("1Mi")
	milli := resource.MustParse("1m")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client", Labels: map[string]string{"app": "client", "tier": "kn"},
			Annotations: map[string]string{"note": "shaped like Knative's"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "main", Image: "example/helper:1", Command: []string{"helper"},
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Env: []corev1.EnvVar{
				{Name: "PROCESSNODE_TEST_HELPER", Value: "incluster"}, {Name: "MOUNTS", Value: mnt},
				{Name: "RESOLVE", Value: "backend." + ns + ".svc.cluster.local"}, {Name: "PORT", Value: "8080"},
				fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				fieldEnv("POD_UID", "metadata.uid"), fieldEnv("POD_IP", "status.podIP"), fieldEnv("POD_IPS", "status.podIPs"),
				fieldEnv("HOST_IP", "status.hostIP"), fieldEnv("NODE_NAME", "spec.nodeName"),
				fieldEnv("SA_NAME", "spec.serviceAccountName"), fieldEnv("LABEL_APP", "metadata.labels['app']"),
				fieldEnv("ANNOTATION_NOTE", "metadata.annotations['note']"),
				{Name: "MEM_REQUEST_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
					Resource: "requests.memory", Divisor: mi}}},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "cfg", MountPath: mnt + "/cfg"}, {Name: "sec", MountPath: mnt + "/sec"},
				{Name: "podinfo", MountPath: mnt + "/podinfo"}, {Name: "scratch", MountPath: mnt + "/scratch"},
			},
		}}, Volumes: []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
			{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "cpu-limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu", Divisor: milli}},
			}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}},
	}
}

// backendPod serves on its pod IP at 8080, ready only to probes that send
// Knative's K-Network-Probe header.
func backendPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend", Labels: map[string]string{"app": "backend"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: "example/helper:1", Command: []string{"helper"},
			Env: []corev1.EnvVar{{Name: "PROCESSNODE_TEST_HELPER", Value: "serve"}, {Name: "PORT", Value: "8080"},
				fieldEnv("POD_IP", "status.podIP")},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/probe", Port: intstr.FromInt32(8080), HTTPHeaders: []corev1.HTTPHeader{{Name: "K-Network-Probe", Value: "queue"}}}}},
		}}},
	}
}
