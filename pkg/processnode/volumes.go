package processnode

// Secret volumes. A process node runs programs on this machine's
// filesystem, with no mount namespace of their own, so a volume cannot
// appear at its mountPath. A Secret volume (or a projected volume of
// Secrets, as Gantry's Kubernetes backend mounts a function's secrets)
// is written instead into a private folder of the pod's, one file per
// key, and every environment value that is a mount's path (or under it)
// is rewritten to where that folder is: a program that finds its
// secrets' folder in a variable ($GANTRY_SECRETS_DIR) reads them. Other
// volumes stay ignored, as before. The folder goes with the pod's.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// secretWait bounds how long a pod's start waits for a Secret the node's
// cache has not seen yet (one created just before the pod).
const secretWait = 3 * time.Second

// secretVolumes writes the pod's Secret volumes under dir/volumes and
// returns where each is, by volume name.
func (s envSources) secretVolumes(pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		var files map[string][]byte
		var mode *int32
		var err error
		switch {
		case v.Secret != nil:
			mode = v.Secret.DefaultMode
			files, err = s.secretFiles(pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		case v.Projected != nil && onlySecrets(v.Projected.Sources):
			mode = v.Projected.DefaultMode
			files = map[string][]byte{}
			for _, src := range v.Projected.Sources {
				var got map[string][]byte
				if got, err = s.secretFiles(pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional); err != nil {
					break
				}
				for k, b := range got {
					files[k] = b
				}
			}
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		path := filepath.Join(dir, "volumes", v.Name)
		if err := writeVolume(path, files, mode); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		out[v.Name] = path
	}
	return out, nil
}

func onlySecrets(srcs []corev1.VolumeProjection) bool {
	for _, s := range srcs {
		if s.Secret == nil {
			return false
		}
	}
	return len(srcs) > 0
}

// secretFiles reads a Secret's keys (items, or all), waiting briefly for a
// Secret the cache does not have yet.
func (s envSources) secretFiles(ns, name string, items []corev1.KeyToPath, optional *bool) (map[string][]byte, error) {
	deadline := time.Now().Add(secretWait)
	for {
		sec, err := s.secrets.Secrets(ns).Get(name)
		if apierrors.IsNotFound(err) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", name, err)
		}
		out := map[string][]byte{}
		if len(items) == 0 {
			for k, b := range sec.Data {
				out[k] = b
			}
			return out, nil
		}
		for _, it := range items {
			b, ok := sec.Data[it.Key]
			if !ok {
				return nil, fmt.Errorf("secret %s has no key %q", name, it.Key)
			}
			out[it.Path] = b
		}
		return out, nil
	}
}

// writeVolume writes files into a fresh folder only the node's user reads.
func writeVolume(path string, files map[string][]byte, mode *int32) error {
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return err
	}
	perm := os.FileMode(0o400)
	if mode != nil {
		perm = os.FileMode(*mode) & 0o777
	}
	for name, b := range files {
		clean := filepath.Clean(name)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("path %q leaves the volume", name)
		}
		p := filepath.Join(path, clean)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
		if err := os.Chmod(p, perm); err != nil {
			return err
		}
	}
	return nil
}

// remapMounts rewrites the environment values that are a mount's path, or
// a path under it, to where the node put that volume.
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
