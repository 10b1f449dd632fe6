package processnode

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A projected service-account token is requested from the TokenRequest
// API for the pod's service account, bound to the pod, with the
// projection's audience and expiry; it is kept until 80% of its lifetime,
// then requested again and replaced in the same folder (which a bind mount
// holds), beside the config map and downward-API files of the volume.
func TestServiceAccountTokenIsRequestedAndRefreshed(t *testing.T) {
	client := fake.NewSimpleClientset()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var reqs []*authv1.TokenRequest
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authv1.TokenRequest).DeepCopy()
		if name := a.(k8stesting.CreateActionImpl).Name; name != "robot" || a.GetNamespace() != "ns" {
			t.Errorf("token for %s/%s, want ns/robot", a.GetNamespace(), name)
		}
		reqs = append(reqs, tr)
		tr.Status = authv1.TokenRequestStatus{Token: fmt.Sprintf("token-%d", len(reqs)),
			ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
		return true, tr, nil
	})
	f := informers.NewSharedInformerFactory(client, 0)
	if err := f.Core().V1().ConfigMaps().Informer().GetStore().Add(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "CA"}}); err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"}, Spec: corev1.PodSpec{
		ServiceAccountName: "robot",
		Volumes: []corev1.Volume{{Name: "api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "knative", ExpirationSeconds: &exp, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}}}}}
	dir := t.TempDir()
	w := &volumeWriter{src: envSources{configMaps: f.Core().V1().ConfigMaps().Lister(), client: client},
		pod: pod, dir: dir, now: func() time.Time { return now }}
	vols, err := w.write(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	folder := vols.paths["api"]
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(folder, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if read("token") != "token-1" || read("ca.crt") != "CA" || read("namespace") != "ns" {
		t.Fatalf("volume holds token %q, ca.crt %q, namespace %q", read("token"), read("ca.crt"), read("namespace"))
	}
	if len(reqs) != 1 {
		t.Fatalf("%d token requests", len(reqs))
	}
	r := reqs[0].Spec
	if len(r.Audiences) != 1 || r.Audiences[0] != "knative" || *r.ExpirationSeconds != 600 ||
		r.BoundObjectRef == nil || r.BoundObjectRef.Kind != "Pod" || r.BoundObjectRef.Name != "p" || r.BoundObjectRef.UID != "uid-p" {
		t.Errorf("token request %+v", r)
	}
	if want := now.Add(480 * time.Second); !vols.refresh["api/token"].Equal(want) {
		t.Errorf("token refresh at %v, want %v (80%% of 600 s)", vols.refresh["api/token"], want)
	}
	if want := now.Add(resyncVolumes); !vols.next(now).Equal(want) {
		t.Errorf("next update at %v, want %v (the resync comes first)", vols.next(now), want)
	}
	before, err := os.Stat(folder)
	if err != nil {
		t.Fatal(err)
	}

	now = now.Add(479 * time.Second)
	w.prev = vols
	if vols, err = w.write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || read("token") != "token-1" {
		t.Fatalf("before 80%% of its lifetime: %d requests, token %q", len(reqs), read("token"))
	}
	now = now.Add(2 * time.Second)
	w.prev = vols
	if _, err = w.write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || read("token") != "token-2" {
		t.Fatalf("after 80%% of its lifetime: %d requests, token %q", len(reqs), read("token"))
	}
	after, err := os.Stat(folder)
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("the volume's folder was replaced (%v): a bind mount of it would keep the old one", err)
	}
}

// The hosts files name each Service at its ClusterIP, which the service
// proxy answers, and a headless one at its first ready endpoint (not at
// all without one), in the pod's namespace by its short name too, and the
// API server at the relay.
func TestHostsNameServicesAtTheirClusterIP(t *testing.T) {
	no, yes := false, true
	slice := func(ns, svc string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	}
	ep := func(addr string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	svc := func(ns, name, clusterIP string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: clusterIP}}
	}
	alias := func(ns, name, externalName string) *corev1.Service {
		s := svc(ns, name, "")
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, externalName
		return s
	}
	services := []*corev1.Service{
		svc("knative-serving", "autoscaler", "10.96.0.20"), svc("kn", "none-ready", "10.96.0.21"),
		svc("kn", "headless", "None"), svc("kn", "headless-none-ready", "None"),
		alias("kn", "mapped", "example.test"),
		// Knative's cluster-local name of a Service: an ExternalName to the
		// ingress's private load balancer, followed as DNS follows a CNAME,
		// through another alias too; a loop and a missing target name nothing.
		alias("kn", "private", "autoscaler.knative-serving.svc.cluster.local"),
		alias("kn", "second", "private.kn.svc."), alias("kn", "loop-a", "loop-b.kn.svc"), alias("kn", "loop-b", "loop-a.kn.svc"),
		alias("kn", "dangling", "gone.kn.svc.cluster.local"), alias("kn", "too-deep", "a.b.kn.svc"),
	}
	h := &hostsTable{apiAddr: "198.18.0.1"}
	if !h.set(serviceAddrs(services, []*discoveryv1.EndpointSlice{
		slice("knative-serving", "autoscaler", ep("198.18.0.9", &yes)),
		slice("kn", "none-ready", ep("198.18.0.7", &no)),
		slice("kn", "headless", ep("198.18.0.9", &yes), ep("198.18.0.3", &no), ep("198.18.0.5", nil)),
		slice("kn", "headless-none-ready", ep("198.18.0.7", &no)),
		slice("kn", "no-service", ep("198.18.0.8", &yes)),
	})) {
		t.Fatal("the first table did not count as a change")
	}
	got := string(h.render("kn", "client", "198.18.0.2"))
	for _, want := range []string{
		"198.18.0.2\tclient\n",
		"198.18.0.1\tkubernetes.default.svc.cluster.local kubernetes.default.svc kubernetes.default\n",
		"10.96.0.20\tautoscaler.knative-serving.svc.cluster.local autoscaler.knative-serving.svc autoscaler.knative-serving\n",
		"10.96.0.21\tnone-ready.kn.svc.cluster.local none-ready.kn.svc none-ready.kn none-ready\n",
		"198.18.0.5\theadless.kn.svc.cluster.local headless.kn.svc headless.kn headless\n",
		"10.96.0.20\tprivate.kn.svc.cluster.local private.kn.svc private.kn private\n",
		"10.96.0.20\tsecond.kn.svc.cluster.local second.kn.svc second.kn second\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts file lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"headless-none-ready", "mapped", "no-service", "loop-a", "loop-b", "dangling", "too-deep"} {
		if strings.Contains(got, not) {
			t.Errorf("hosts file names %s:\n%s", not, got)
		}
	}
	if got := string(h.render("knative-serving", "activator", "198.18.0.4")); !strings.Contains(got, "autoscaler.knative-serving autoscaler\n") {
		t.Errorf("the short name is missing in the Service's own namespace:\n%s", got)
	}
	if h.set(serviceAddrs(services, []*discoveryv1.EndpointSlice{
		slice("kn", "headless", ep("198.18.0.5", nil)), slice("kn", "none-ready", ep("198.18.0.7", &yes)),
	})) {
		t.Error("the same addresses counted as a change")
	}
}

// The proxy listens on every TCP port of every Service with a ClusterIP in
// the range, and forwards to the ready endpoints of the matching port.
func TestServiceProxyListenersAndEndpoints(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	svc := func(name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kn", Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	got := wantedListeners([]*corev1.Service{
		svc("web", "10.96.0.30", corev1.ServicePort{Name: "http", Port: 80, Protocol: tcp},
			corev1.ServicePort{Name: "dns", Port: 53, Protocol: udp}, corev1.ServicePort{Name: "h2", Port: 81}),
		svc("headless", "None", corev1.ServicePort{Port: 80}),
		svc("elsewhere", "10.200.0.1", corev1.ServicePort{Port: 80}),
	}, DefaultServiceRange)
	want := map[string]servicePort{
		"10.96.0.30:80": {"kn", "web", "http"}, "10.96.0.30:81": {"kn", "web", "h2"},
	}
	if !maps.Equal(got, want) {
		t.Errorf("listeners %v, want %v", got, want)
	}

	no, yes := false, true
	name := func(s string) *string { return &s }
	port := func(p int32) *int32 { return &p }
	ep := func(addr string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	ess := []*discoveryv1.EndpointSlice{
		{AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Name: name("http"), Port: port(8080), Protocol: &tcp}, {Name: name("h2"), Port: port(8081)}},
			Endpoints: []discoveryv1.Endpoint{ep("198.18.0.9", &yes), ep("198.18.0.3", &no), ep("198.18.0.5", nil)}},
		{AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Name: name("http"), Port: port(8080)}},
			Endpoints: []discoveryv1.Endpoint{ep("198.18.0.9", &yes), ep("198.18.0.6", &yes)}},
		{AddressType: discoveryv1.AddressTypeIPv6,
			Ports:     []discoveryv1.EndpointPort{{Name: name("http"), Port: port(8080)}},
			Endpoints: []discoveryv1.Endpoint{ep("fd00::1", &yes)}},
	}
	if got, want := endpointAddrs(ess, "http"), []string{"198.18.0.5:8080", "198.18.0.6:8080", "198.18.0.9:8080"}; !slices.Equal(got, want) {
		t.Errorf("http endpoints %v, want %v", got, want)
	}
	if got, want := endpointAddrs(ess, "h2"), []string{"198.18.0.5:8081", "198.18.0.9:8081"}; !slices.Equal(got, want) {
		t.Errorf("h2 endpoints %v, want %v", got, want)
	}
	if got := endpointAddrs(ess, ""); len(got) != 0 {
		t.Errorf("an unnamed port matched %v", got)
	}
}

// Without a mount namespace (no privilege), a pod still runs, its
// environment values that name a mountPath name the volume's folder, and
// its status says which volumes are not mounted.
func TestUnmountedVolumesAreNamedInTheStatus(t *testing.T) {
	tn := newTestNode(t, 2)
	pod := servePod("novols", corev1.EnvVar{Name: "DATA", Value: "/data/file"})
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	tn.create(t, pod)
	p := tn.waitFor(t, "novols", "Ready", 30*time.Second, podReady)
	if m := p.Status.Message; !strings.Contains(m, "volumes not mounted") || !strings.Contains(m, "data at /data in main") {
		t.Errorf("status message %q does not name the missing mount", m)
	}
	r := tn.p.get("ns/novols")
	want := "DATA=" + filepath.Join(r.dir, "volumes", "data", "file")
	found := false
	for _, kv := range r.cs[0].env {
		found = found || kv == want
	}
	if !found {
		t.Errorf("env %v lacks %s", r.cs[0].env, want)
	}
}
