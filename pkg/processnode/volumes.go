package processnode

// Volumes. Each volume of a pod is a folder of the pod's own folder,
// volumes/NAME, filled as a kubelet fills it: secret, configMap,
// downwardAPI and projected volumes (secrets, config maps, the downward
// API and service-account tokens from the TokenRequest API) hold one file
// per key; an emptyDir is an empty folder (a medium of Memory puts it
// under /dev/shm). With a mount namespace (mounts.go) each folder is
// bind-mounted at its mountPath; without one, each environment value that
// names a mountPath (or a path under it) is rewritten to the folder, and
// the pod's status says which mounts are missing.
//
// Files are updated in place while the pod runs (write to a temporary
// name, rename over), never by replacing the folder, which a bind mount
// holds: tokens before they expire, the other sources every minute.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sourceWait bounds how long a pod's start waits for a Secret or ConfigMap
// the node's cache has not seen yet (one created just before the pod).
const sourceWait = 3 * time.Second

// resyncVolumes is how often a running pod's volumes are brought up to date.
const resyncVolumes = time.Minute

// Bounds on what a volume may hold, checked before anything is written.
const (
	maxVolumeFiles = 1024
	maxVolumeBytes = 64 << 20
)

// podVolumes are a pod's volumes, by name: their folders, and when the
// service-account tokens among them must be requested again.
type podVolumes struct {
	paths   map[string]string
	refresh map[string]time.Time // by volume/path of each token
	tokens  map[string][]byte
}

// volumeWriter fills a pod's volumes from the node's caches and the API.
type volumeWriter struct {
	src    envSources
	pod    *corev1.Pod
	dir    string
	podIP  string
	hostIP string
	alloc  corev1.ResourceList // the node's allocatable, limits' default
	wait   bool                // wait briefly for sources the cache lacks (at start)
	now    func() time.Time
	prev   *podVolumes // tokens still valid are kept
}

// supportedVolume says why the node cannot give a pod a volume, or "".
func supportedVolume(v corev1.Volume) string {
	switch {
	case v.Secret != nil, v.ConfigMap != nil, v.DownwardAPI != nil:
		return ""
	case v.EmptyDir != nil:
		if m := v.EmptyDir.Medium; m != "" && m != corev1.StorageMediumDefault && m != corev1.StorageMediumMemory {
			return fmt.Sprintf("volume %s: emptyDir medium %q is not supported by the process node", v.Name, m)
		}
		return ""
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.ClusterTrustBundle != nil || s.PodCertificate != nil {
				return fmt.Sprintf("volume %s: projected clusterTrustBundle and podCertificate sources are not supported by the process node", v.Name)
			}
		}
		return ""
	}
	return fmt.Sprintf("volume %s: only secret, configMap, downwardAPI, projected and emptyDir volumes are supported by the process node", v.Name)
}

// write fills every volume of the pod and returns where each is.
func (w *volumeWriter) write(ctx context.Context) (*podVolumes, error) {
	out := &podVolumes{paths: map[string]string{}, refresh: map[string]time.Time{}, tokens: map[string][]byte{}}
	for _, v := range w.pod.Spec.Volumes {
		if why := supportedVolume(v); why != "" {
			return nil, fmt.Errorf("%s", why)
		}
		path := filepath.Join(w.dir, "volumes", v.Name)
		if v.EmptyDir != nil {
			if v.EmptyDir.Medium == corev1.StorageMediumMemory {
				// Memory-backed: a folder on the machine's tmpfs, linked
				// from the pod's folder so it goes with it.
				if p, err := memoryDir(w.dir, v.Name); err != nil {
					return nil, fmt.Errorf("volume %s: %w", v.Name, err)
				} else {
					path = p
				}
			} else if err := os.MkdirAll(path, 0o777); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			out.paths[v.Name] = path
			continue
		}
		files, mode, err := w.files(ctx, v, out)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		if err := syncFolder(path, files, mode); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		out.paths[v.Name] = path
	}
	return out, nil
}

// memoryDir makes the folder of a Memory emptyDir under /dev/shm and links
// it from the pod's folder; removeMemoryDirs removes it with the pod.
func memoryDir(podDir, name string) (string, error) {
	base := filepath.Join("/dev/shm", "gantry-"+filepath.Base(podDir))
	path := filepath.Join(base, name)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return "", err
	}
	link := filepath.Join(podDir, "memory-volumes")
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(base, link); err != nil {
			return "", err
		}
	}
	return path, nil
}

// removeMemoryDirs removes what memoryDir made for the pod.
func removeMemoryDirs(podDir string) {
	if base, err := os.Readlink(filepath.Join(podDir, "memory-volumes")); err == nil && strings.HasPrefix(base, "/dev/shm/gantry-") {
		_ = os.RemoveAll(base)
	}
}

// files is what one volume holds, path by path, and its files' mode.
func (w *volumeWriter) files(ctx context.Context, v corev1.Volume, out *podVolumes) (map[string][]byte, *int32, error) {
	files := map[string][]byte{}
	var err error
	switch {
	case v.Secret != nil:
		err = w.secret(files, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		return files, v.Secret.DefaultMode, err
	case v.ConfigMap != nil:
		err = w.configMap(files, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
		return files, v.ConfigMap.DefaultMode, err
	case v.DownwardAPI != nil:
		err = w.downward(files, v.DownwardAPI.Items)
		return files, v.DownwardAPI.DefaultMode, err
	}
	for _, s := range v.Projected.Sources {
		switch {
		case s.Secret != nil:
			err = w.secret(files, s.Secret.Name, s.Secret.Items, s.Secret.Optional)
		case s.ConfigMap != nil:
			err = w.configMap(files, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional)
		case s.DownwardAPI != nil:
			err = w.downward(files, s.DownwardAPI.Items)
		case s.ServiceAccountToken != nil:
			err = w.token(ctx, files, v.Name, s.ServiceAccountToken, out)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return files, v.Projected.DefaultMode, nil
}

func (w *volumeWriter) secret(files map[string][]byte, name string, items []corev1.KeyToPath, opt *bool) error {
	var data map[string][]byte
	err := w.waitFor(func() error {
		sec, err := w.src.secrets.Secrets(w.pod.Namespace).Get(name)
		if err == nil {
			data = sec.Data
		}
		return err
	})
	if apierrors.IsNotFound(err) && optional(opt) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	return pick(files, data, items, "secret "+name)
}

func (w *volumeWriter) configMap(files map[string][]byte, name string, items []corev1.KeyToPath, opt *bool) error {
	data := map[string][]byte{}
	err := w.waitFor(func() error {
		cm, err := w.src.configMaps.ConfigMaps(w.pod.Namespace).Get(name)
		if err == nil {
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				data[k] = v
			}
		}
		return err
	})
	if apierrors.IsNotFound(err) && optional(opt) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config map %s: %w", name, err)
	}
	return pick(files, data, items, "config map "+name)
}

// waitFor retries get while its object is not in the cache yet, for at
// most sourceWait, and only when the pod is starting.
func (w *volumeWriter) waitFor(get func() error) error {
	deadline := time.Now().Add(sourceWait)
	for {
		err := get()
		if !apierrors.IsNotFound(err) || !w.wait || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pick copies the keys items names (all keys without items) into files.
func pick(files, data map[string][]byte, items []corev1.KeyToPath, what string) error {
	if len(items) == 0 {
		for k, b := range data {
			files[k] = b
		}
		return nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files[it.Path] = b
	}
	return nil
}

func (w *volumeWriter) downward(files map[string][]byte, items []corev1.DownwardAPIVolumeFile) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = w.fieldFile(it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = resourceValue(w.pod, it.ResourceFieldRef, w.alloc)
		default:
			err = fmt.Errorf("downward API file %s: no fieldRef or resourceFieldRef", it.Path)
		}
		if err != nil {
			return err
		}
		files[it.Path] = []byte(v)
	}
	return nil
}

// fieldFile is a downward-API field as a file holds it: the whole labels
// and annotations too, one key="value" line each, sorted.
func (w *volumeWriter) fieldFile(path string) (string, error) {
	var m map[string]string
	switch path {
	case "metadata.labels":
		m = w.pod.Labels
	case "metadata.annotations":
		m = w.pod.Annotations
	default:
		return fieldValue(w.pod, path, w.podIP, w.hostIP)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String(), nil
}

// token requests a service-account token bound to the pod, as a kubelet
// does, unless the previous one is still good; out records when to ask
// again: at 80% of its lifetime, or after 24 hours.
func (w *volumeWriter) token(ctx context.Context, files map[string][]byte, vol string, p *corev1.ServiceAccountTokenProjection, out *podVolumes) error {
	key := vol + "/" + p.Path
	now := w.now()
	if w.prev != nil {
		if at, ok := w.prev.refresh[key]; ok && now.Before(at) {
			files[p.Path] = w.prev.tokens[key]
			out.refresh[key], out.tokens[key] = at, w.prev.tokens[key]
			return nil
		}
	}
	if w.src.client == nil {
		return fmt.Errorf("service-account token %s: the node has no API client", p.Path)
	}
	sa := w.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(3600)
	if p.ExpirationSeconds != nil {
		exp = *p.ExpirationSeconds
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: w.pod.Name, UID: w.pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := w.src.client.CoreV1().ServiceAccounts(w.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("service-account token for %s: %w", sa, err)
	}
	if tr.Status.Token == "" {
		return fmt.Errorf("service-account token for %s: the API server returned no token", sa)
	}
	life := tr.Status.ExpirationTimestamp.Sub(now)
	if life <= 0 {
		life = time.Duration(exp) * time.Second
	}
	files[p.Path] = []byte(tr.Status.Token)
	out.refresh[key] = now.Add(min(life*8/10, 24*time.Hour))
	out.tokens[key] = files[p.Path]
	return nil
}

// next is when the volumes must be written again: the first token's
// refresh, else a resync.
func (v *podVolumes) next(now time.Time) time.Time {
	at := now.Add(resyncVolumes)
	for _, t := range v.refresh {
		if t.Before(at) {
			at = t
		}
	}
	return at
}

// resourceValue is a container's limit or request as the downward API
// gives it: in units of the divisor (default 1), rounded up; a limit not
// set is the node's allocatable.
func resourceValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector, alloc corev1.ResourceList) (string, error) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ref.ContainerName {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	rn := corev1.ResourceName(name)
	var q resource.Quantity
	var found bool
	if kind == "limits" {
		q, found = c.Resources.Limits[rn]
		if !found {
			q, found = alloc[rn]
		}
	} else {
		q, found = c.Resources.Requests[rn]
		if !found && rn != corev1.ResourceCPU && rn != corev1.ResourceMemory && rn != corev1.ResourceEphemeralStorage {
			return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if rn == corev1.ResourceCPU {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}

// syncFolder makes path hold exactly files: each file written only when it
// changed, to a temporary name then renamed over, so a reader never sees
// half a file; files no longer wanted are removed. The folder itself is
// kept, so a bind mount of it sees every change.
func syncFolder(path string, files map[string][]byte, mode *int32) error {
	if len(files) > maxVolumeFiles {
		return fmt.Errorf("%d files, at most %d", len(files), maxVolumeFiles)
	}
	total := 0
	for _, b := range files {
		total += len(b)
	}
	if total > maxVolumeBytes {
		return fmt.Errorf("%d bytes, at most %d", total, maxVolumeBytes)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	perm := os.FileMode(0o644)
	if mode != nil {
		perm = os.FileMode(*mode) & 0o777
	}
	want := map[string]bool{}
	for name, b := range files {
		clean := filepath.Clean(name)
		if filepath.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("path %q leaves the volume", name)
		}
		want[clean] = true
		p := filepath.Join(path, clean)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
			if err := os.Chmod(p, perm); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Chmod(tmp, perm); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	return filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		if !want[rel] {
			return os.Remove(p)
		}
		return nil
	})
}

// remapMounts rewrites the environment values that are a mount's path, or
// a path under it, to where the node put that volume: what a pod without a
// mount namespace gets instead of its mounts.
func remapMounts(env []string, mounts []corev1.VolumeMount, vols map[string]string) []string {
	for _, m := range mounts {
		host, ok := vols[m.Name]
		if !ok || m.MountPath == "" {
			continue
		}
		mount := filepath.Clean(m.MountPath)
		if m.SubPath != "" {
			host = filepath.Join(host, filepath.Clean("/"+m.SubPath))
		}
		for i, kv := range env {
			k, v, _ := cut(kv)
			switch {
			case v == mount || v == mount+"/":
				env[i] = k + "=" + host
			case strings.HasPrefix(v, mount+"/"):
				env[i] = k + "=" + host + v[len(mount):]
			}
		}
	}
	return env
}

// volumeWriter is the writer of the pod's volumes. Call with r.mu held or
// before the pod's goroutines start; the pod object it holds is a copy.
func (r *podRun) volumeWriter(wait bool) *volumeWriter {
	return &volumeWriter{src: r.p.cfg.Env, pod: r.pod.DeepCopy(), dir: r.dir, podIP: r.ipString(),
		hostIP: r.p.cfg.HostIP, alloc: r.p.cfg.Allocatable, wait: wait, now: time.Now, prev: r.vols}
}

// keepVolumes keeps the pod's volumes up to date until it stops: tokens
// before they expire, the rest every resyncVolumes. A failed update is
// tried again after retryVolumes.
func (r *podRun) keepVolumes() {
	defer r.loops.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	r.mu.Lock()
	at := r.vols.next(time.Now())
	r.mu.Unlock()
	for {
		t := time.NewTimer(time.Until(at))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		r.mu.Lock()
		w := r.volumeWriter(false)
		r.mu.Unlock()
		vols, err := w.write(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.p.cfg.Logger.Warn("updating a pod's volumes", "pod", r.key, "err", err)
			at = time.Now().Add(retryVolumes)
			continue
		}
		r.mu.Lock()
		r.vols = vols
		r.mu.Unlock()
		at = vols.next(time.Now())
	}
}

// retryVolumes is the wait before a failed volume update is tried again.
const retryVolumes = 10 * time.Second
