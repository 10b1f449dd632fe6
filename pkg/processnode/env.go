package processnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// maxEnv bounds one container's environment.
const maxEnv = 1024

// envSources are where env values come from besides the pod itself.
type envSources struct {
	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister
	client     kubernetes.Interface // service-account tokens (TokenRequest)
}

// containerEnv is the environment a container's process starts with, in
// the order a kubelet builds it: the node's base variables (PATH with the
// node's program folder first, HOME, HOSTNAME), then envFrom, then env,
// each $(VAR) in env expanded from what came before. Later entries win.
func (s envSources) containerEnv(pod *corev1.Pod, c *corev1.Container, podIP, hostIP string, base []string, alloc corev1.ResourceList) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	for _, from := range c.EnvFrom {
		data, err := s.envFromData(pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			var err error
			if v, err = s.valueFrom(pod, c, e, podIP, hostIP, alloc); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		} else {
			v = expandVars(v, vals)
		}
		set(e.Name, v)
	}
	if len(order) > maxEnv {
		return nil, fmt.Errorf("%d environment variables, at most %d", len(order), maxEnv)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}

func (s envSources) envFromData(ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := s.configMaps.ConfigMaps(ns).Get(from.ConfigMapRef.Name)
		if apierrors.IsNotFound(err) && optional(from.ConfigMapRef.Optional) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom config map %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		sec, err := s.secrets.Secrets(ns).Get(from.SecretRef.Name)
		if apierrors.IsNotFound(err) && optional(from.SecretRef.Optional) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom secret %s: %w", from.SecretRef.Name, err)
		}
		out := make(map[string]string, len(sec.Data))
		for k, v := range sec.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

func optional(b *bool) bool { return b != nil && *b }

func (s envSources) valueFrom(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, podIP, hostIP string, alloc corev1.ResourceList) (string, error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		return fieldValue(pod, vf.FieldRef.FieldPath, podIP, hostIP)
	case vf.ResourceFieldRef != nil:
		ref := *vf.ResourceFieldRef
		if ref.ContainerName == "" {
			ref.ContainerName = c.Name // in env, the container's own by default
		}
		return resourceValue(pod, &ref, alloc)
	case vf.ConfigMapKeyRef != nil:
		r := vf.ConfigMapKeyRef
		cm, err := s.configMaps.ConfigMaps(pod.Namespace).Get(r.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(r.Optional) {
				return "", nil
			}
			return "", fmt.Errorf("config map %s: %w", r.Name, err)
		}
		v, ok := cm.Data[r.Key]
		if !ok && !optional(r.Optional) {
			return "", fmt.Errorf("config map %s has no key %q", r.Name, r.Key)
		}
		return v, nil
	case vf.SecretKeyRef != nil:
		r := vf.SecretKeyRef
		sec, err := s.secrets.Secrets(pod.Namespace).Get(r.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(r.Optional) {
				return "", nil
			}
			return "", fmt.Errorf("secret %s: %w", r.Name, err)
		}
		v, ok := sec.Data[r.Key]
		if !ok && !optional(r.Optional) {
			return "", fmt.Errorf("secret %s has no key %q", r.Name, r.Key)
		}
		return string(v), nil
	}
	return "", fmt.Errorf("unsupported valueFrom (the process node resolves fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef)")
}

// fieldValue resolves a downward-API field path. status.podIP is the
// address the node gave the pod, so a program can listen on it.
func fieldValue(pod *corev1.Pod, path, podIP, hostIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok {
			if key, ok := strings.CutSuffix(rest, "']"); ok {
				return m[key], nil
			}
		}
	}
	return "", fmt.Errorf("unsupported field path %q", path)
}

// expandVars replaces $(NAME) with a defined variable's value, leaves an
// undefined reference as written, and turns $$ into $, as a kubelet does.
func expandVars(s string, vals map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vals[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// lookPath finds name as a shell would in the PATH of env: a name with a
// slash is taken as it is (relative to dir), otherwise the first
// executable file of that name in PATH's folders.
func lookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in PATH %s (name it in the node's programs, or give an absolute path)", name, pathEnv)
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
