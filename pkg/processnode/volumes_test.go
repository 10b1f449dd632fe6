package processnode

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// A projected volume of Secrets becomes a private folder of files, and the
// variable naming its mount path names that folder; a Secret the node
// cannot find fails the pod with its name.
func TestSecretVolumesAreWrittenAndTheirPathsRemapped(t *testing.T) {
	f := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	store := f.Core().V1().Secrets().Informer().GetStore()
	if err := store.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Data: map[string][]byte{"db": []byte("hunter2"), "other": []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	src := envSources{secrets: f.Core().V1().Secrets().Lister()}
	mode := int32(0o400)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: &mode, Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"},
				Items:                []corev1.KeyToPath{{Key: "db", Path: "db"}}}}}}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	dir := t.TempDir()
	w := &volumeWriter{src: src, pod: pod, dir: dir, now: time.Now}
	pv, err := w.write(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	vols := pv.paths
	if len(vols) != 2 || vols["s"] != filepath.Join(dir, "volumes", "s") || vols["cfg"] != filepath.Join(dir, "volumes", "cfg") {
		t.Fatalf("volumes %v", vols)
	}
	b, err := os.ReadFile(filepath.Join(vols["s"], "db"))
	if err != nil || string(b) != "hunter2" {
		t.Fatalf("db: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(vols["s"], "other")); !os.IsNotExist(err) {
		t.Fatalf("a key not in items was written: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(vols["s"], "db")); st.Mode().Perm() != 0o400 {
		t.Fatalf("mode %v", st.Mode())
	}
	env := remapMounts([]string{"A=/var/openfaas/secrets", "B=/var/openfaas/secrets/db", "C=/var/openfaas/secretsX", "D=x", "E=/etc/cfg/f"},
		[]corev1.VolumeMount{{Name: "s", MountPath: "/var/openfaas/secrets"}, {Name: "cfg", MountPath: "/etc/cfg"}}, vols)
	want := []string{"A=" + vols["s"], "B=" + vols["s"] + "/db", "C=/var/openfaas/secretsX", "D=x", "E=" + vols["cfg"] + "/f"}
	for i := range want {
		if env[i] != want[i] {
			t.Fatalf("env %v, want %v", env, want)
		}
	}

	pod.Spec.Volumes[0].Projected.Sources[0].Secret.Name = "missing"
	if _, err := w.write(context.Background()); err == nil {
		t.Fatal("a missing secret was not refused")
	}
}
