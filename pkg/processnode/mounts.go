package processnode

// Mounts. A pod with a network namespace runs each program through `ip
// netns exec`, which gives the program a mount namespace of its own (with
// the host's mounts as slaves, so nothing mounted in it reaches the host)
// and bind-mounts /etc/netns/<namespace>/hosts over /etc/hosts (hosts.go).
// In that mount namespace a small shell script bind-mounts each volume's
// folder at its mountPath, read-only where asked and always for secret,
// configMap, downwardAPI and projected volumes (as a kubelet does), then
// execs the program, so the program's pid is still the container's.
//
// A mountPath that does not exist on this machine is created first (an
// empty folder, or an empty file for a subPath that is a file), and left in
// place afterwards: another pod may be using it as a mount point at that
// moment.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// mount is one bind mount of a container.
type mount struct {
	name     string // the volume's
	src, dst string
	ro       bool
}

// mountScript bind-mounts its arguments' triples (source, target, "ro" or
// "rw"), the count first, then execs the rest.
const mountScript = `n=$1; shift
while [ "$n" -gt 0 ]; do
	mount --bind "$1" "$2" || { echo "processnode: cannot mount $1 at $2" >&2; exit 127; }
	if [ "$3" = ro ]; then mount -o remount,bind,ro "$2" || { echo "processnode: cannot make $2 read-only" >&2; exit 127; }; fi
	shift 3; n=$((n-1))
done
exec "$@"`

// containerMounts resolves a container's volume mounts against the pod's
// volumes; env expands subPathExpr.
func containerMounts(pod *corev1.Pod, c *corev1.Container, vols map[string]string, env []string) ([]mount, error) {
	kinds := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		kinds[v.Name] = v
	}
	vals := map[string]string{}
	for _, kv := range env {
		k, v, _ := cut(kv)
		vals[k] = v
	}
	var out []mount
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume mount %s: the pod has no volume of that name", m.Name)
		}
		if !filepath.IsAbs(m.MountPath) {
			return nil, fmt.Errorf("volume mount %s: mountPath %q is not absolute", m.Name, m.MountPath)
		}
		if p := m.MountPropagation; p != nil && *p == corev1.MountPropagationBidirectional {
			return nil, fmt.Errorf("volume mount %s: Bidirectional mount propagation is not supported by the process node", m.Name)
		}
		if r := m.RecursiveReadOnly; r != nil && *r == corev1.RecursiveReadOnlyEnabled {
			return nil, fmt.Errorf("volume mount %s: recursiveReadOnly Enabled is not supported by the process node", m.Name)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expandVars(m.SubPathExpr, vals)
		}
		if sub != "" {
			clean := filepath.Clean(sub)
			if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
				return nil, fmt.Errorf("volume mount %s: subPath %q leaves the volume", m.Name, sub)
			}
			src = filepath.Join(src, clean)
			if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
				// A kubelet creates a missing subPath as a folder.
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, fmt.Errorf("volume mount %s: %w", m.Name, err)
				}
			}
		}
		v := kinds[m.Name]
		ro := m.ReadOnly || v.Secret != nil || v.ConfigMap != nil || v.DownwardAPI != nil || v.Projected != nil
		out = append(out, mount{name: m.Name, src: src, dst: filepath.Clean(m.MountPath), ro: ro})
	}
	// Parents first, so a mount inside another lands in it.
	sort.SliceStable(out, func(i, j int) bool { return out[i].dst < out[j].dst })
	return out, nil
}

// makeMountPoints creates the targets that do not exist on this machine:
// a folder for a folder, an empty file for a file.
func makeMountPoints(ms []mount) error {
	for _, m := range ms {
		if _, err := os.Stat(m.dst); err == nil {
			continue
		}
		st, err := os.Stat(m.src)
		if err != nil {
			return fmt.Errorf("volume mount %s: %w", m.name, err)
		}
		if st.IsDir() {
			if err := os.MkdirAll(m.dst, 0o755); err != nil {
				return fmt.Errorf("volume mount %s: creating the mount point: %w", m.name, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(m.dst), 0o755); err != nil {
			return fmt.Errorf("volume mount %s: creating the mount point: %w", m.name, err)
		}
		f, err := os.OpenFile(m.dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("volume mount %s: creating the mount point: %w", m.name, err)
		}
		f.Close()
	}
	return nil
}

// unmounted says which mounts a pod without a mount namespace lacks.
func unmounted(cs []*container) string {
	var parts []string
	for _, c := range cs {
		for _, m := range c.mounts {
			parts = append(parts, fmt.Sprintf("%s at %s in %s (its files are in %s)", m.name, m.dst, c.spec.Name, m.src))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "volumes not mounted (this node has no pod network and mount namespaces: it needs CAP_NET_ADMIN and CAP_SYS_ADMIN); environment values naming a mountPath name the folder instead: " + strings.Join(parts, "; ")
}

// netnsArgv is the argv that runs path with argv's arguments in the
// network namespace ns, with the mounts in a mount namespace of its own;
// the program sees path as its argv[0].
func netnsArgv(ns, path string, argv []string, ms []mount) (string, []string, error) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return "", nil, err
	}
	out := []string{"ip", "netns", "exec", ns}
	if len(ms) > 0 {
		sh, err := exec.LookPath("sh")
		if err != nil {
			return "", nil, err
		}
		out = append(out, sh, "-c", mountScript, "processnode-mount", strconv.Itoa(len(ms)))
		for _, m := range ms {
			mode := "rw"
			if m.ro {
				mode = "ro"
			}
			out = append(out, m.src, m.dst, mode)
		}
	}
	return ip, append(append(out, path), argv[1:]...), nil
}
