package kube

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/stack"
)

// Labels and names on every object the backend creates.
const (
	// LabelManagedBy and ManagedBy mark Gantry's objects, so they can be
	// listed and told from the user's.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "gantry"
	// LabelFunction names the function an object or pod belongs to; it
	// is the selector of the workload and the Service.
	LabelFunction = "gantry.dev/function"
	// LabelServiceName is the EndpointSlice label naming its Service.
	LabelServiceName = "kubernetes.io/service-name"
	// DeletionCostAnnotation ranks pods for a ReplicaSet's scale-down:
	// the lowest cost goes first.
	DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"
	// PortName is the container and Service port instances serve on.
	PortName = "http"
	// ContainerName is the function's container in the pod.
	ContainerName = "function"
	// DefaultPort is the port an instance listens on, passed as $PORT.
	DefaultPort = 8080
	// EnvPodIP is the variable that carries the pod's address.
	EnvPodIP = "POD_IP"
)

// selectorLabels pick a function's pods. They are also on the Service, so
// the EndpointSlice controller copies them onto its slices.
func selectorLabels(name string) map[string]string {
	return map[string]string{LabelFunction: name, LabelManagedBy: ManagedBy}
}

// objectLabels are the user's labels (OpenFaaS puts them on the
// Deployment and its pods) under Gantry's own, which win so the selector
// always matches.
func objectLabels(f stack.Function) map[string]string {
	out := maps.Clone(f.Labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, selectorLabels(f.Name))
	return out
}

// objectAnnotations carry the user's annotations plus the criticality, so
// it is visible on a Deployment too, which has no field for it.
func objectAnnotations(f stack.Function) map[string]string {
	out := maps.Clone(f.Annotations)
	if out == nil {
		out = map[string]string{}
	}
	out[stack.AnnotationCriticality] = strconv.Itoa(f.Criticality)
	return out
}

// podTemplate is the pod every instance of f runs: the image, the command
// (containerCommand), $PORT, and a readiness
// probe on the health path, which is what turns into EndpointSlice
// readiness and so into Ready events.
func podTemplate(f stack.Function, port int32) corev1.PodTemplateSpec {
	c := corev1.Container{
		Name:  ContainerName,
		Image: f.Image,
		Env:   containerEnv(f, port),
		Ports: []corev1.ContainerPort{{Name: PortName, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: backend.HealthPath, Port: intstr.FromInt32(port)}},
			// A cold start is on the request path: probe every second,
			// not every ten, so readiness is seen soon after it happens.
			PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 3,
		},
	}
	if f.Command != "" {
		c.Command = containerCommand(f.Command)
	}
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: objectLabels(f), Annotations: objectAnnotations(f)},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{c},
			// Service links add an env var per Service in the namespace;
			// OpenFaaS turns them off too.
			EnableServiceLinks: ptr.To(false),
		},
	}
	applyFields(f, &tpl.Spec)
	applySecrets(f, &tpl.Spec)
	return tpl
}

// containerEnv is f.Env in key order (map order would change the template,
// and with it roll the pods, on every deploy), then PORT and
// GANTRY_FUNCTION_NAME, which override the user's: the port must match the
// container port the probe and the endpoints use; and POD_IP, the pod's
// address from the downward API, for a program that must listen on that
// address rather than on all of them (on a process node, pods share the
// host's ports: pkg/processnode).
func containerEnv(f stack.Function, port int32) []corev1.EnvVar {
	own := map[string]string{"PORT": strconv.Itoa(int(port)), "GANTRY_FUNCTION_NAME": f.Name, EnvPodIP: ""}
	var env []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(f.Env)) {
		if _, ours := own[k]; !ours {
			env = append(env, corev1.EnvVar{Name: k, Value: f.Env[k]})
		}
	}
	return append(env, corev1.EnvVar{Name: "PORT", Value: own["PORT"]},
		corev1.EnvVar{Name: "GANTRY_FUNCTION_NAME", Value: f.Name},
		corev1.EnvVar{Name: EnvPodIP, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}})
}

// newService is the headless Service whose EndpointSlices route to f's
// ready pods. Headless, because the gateway balances across instances
// itself and needs each pod's address, not a virtual IP.
func newService(f stack.Function, namespace string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: f.Name, Namespace: namespace, Labels: objectLabels(f)},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selectorLabels(f.Name),
			Ports: []corev1.ServicePort{{Name: PortName, Port: port, TargetPort: intstr.FromInt32(port),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

// newRTResource is f as an RTResource: the criticality goes to
// spec.criticality, where the RTResource controller orders its work by it.
func newRTResource(f stack.Function, namespace string, port, replicas int32) *gantryv1.RTResource {
	match := map[string]gantryv1.LabelValue{}
	for k, v := range selectorLabels(f.Name) {
		match[k] = gantryv1.LabelValue(v)
	}
	return &gantryv1.RTResource{
		ObjectMeta: metav1.ObjectMeta{Name: f.Name, Namespace: namespace,
			Labels: objectLabels(f), Annotations: objectAnnotations(f)},
		Spec: gantryv1.RTResourceSpec{
			Replicas:    ptr.To(replicas),
			Criticality: ptr.To(int32(f.Criticality)),
			Selector:    gantryv1.LabelSelector{MatchLabels: match},
			Template:    podTemplate(f, port),
		},
	}
}

// newDeployment is f as a plain Deployment, for clusters or functions that
// do without the RTResource controller.
func newDeployment(f stack.Function, namespace string, port, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: f.Name, Namespace: namespace,
			Labels: objectLabels(f), Annotations: objectAnnotations(f)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(f.Name)},
			Template: podTemplate(f, port),
		},
	}
}

// isManaged reports whether an object carries Gantry's managed-by label;
// the backend never overwrites or deletes an object that does not.
func isManaged(m metav1.Object) bool { return m.GetLabels()[LabelManagedBy] == ManagedBy }

// shellChars are what make a command line need a shell: expansions,
// quoting, pipes, redirections, lists, globs, comments.
const shellChars = "$`'\"\\|&;<>()*?[]{}~#\n"

// containerCommand is fprocess as a container's command. A plain command
// line is split on blanks and run directly, as OpenFaaS's watchdog runs
// fprocess, so an image without a shell (Gantry's own has only /gantry)
// can run it; one that needs a shell runs under /bin/sh -c, as the local
// runtime runs every fprocess.
func containerCommand(fprocess string) []string {
	if strings.ContainsAny(fprocess, shellChars) {
		return []string{"/bin/sh", "-c", fprocess}
	}
	return strings.Fields(fprocess)
}
