package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/rtcontroller"
	"gantry.dev/gantry/pkg/rtqueue"
)

// The controller's service account, as config/rbac binds it.
const (
	controllerSA        = "system:serviceaccount:gantry-system:gantry-controller"
	controllerNamespace = "gantry-system"
)

var controllerSAGroups = []string{"system:serviceaccounts", "system:serviceaccounts:gantry-system", "system:authenticated"}

// permission is one RBAC grant: a verb on a resource (with its
// subresource, "pods" or "rtresources/status") of an API group.
type permission struct{ group, resource, verb string }

func (p permission) String() string { return fmt.Sprintf("%s %s.%s", p.verb, p.resource, p.group) }

// callRecorder records the permission every request needs, and any
// request the apiserver refused, across every client the controller
// builds from one config.
type callRecorder struct {
	mu        sync.Mutex
	used      map[permission]bool
	forbidden []string
	other     []string
}

type recordingTransport struct {
	next http.RoundTripper
	rec  *callRecorder
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	t.rec.record(req, resp, err)
	return resp, err
}

func (r *callRecorder) record(req *http.Request, resp *http.Response, err error) {
	p, ok := permissionOf(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !ok:
		r.other = append(r.other, req.Method+" "+req.URL.Path)
	default:
		r.used[p] = true
		// An informer lists through a watch with sendInitialEvents (client-go's
		// watch-list); against an apiserver without it, client-go falls back
		// to a LIST, so that watch stands for the list too.
		if p.verb == "watch" && req.URL.Query().Get("sendInitialEvents") == "true" {
			r.used[permission{p.group, p.resource, "list"}] = true
		}
	}
	if err == nil && resp.StatusCode == http.StatusForbidden {
		r.forbidden = append(r.forbidden, req.Method+" "+req.URL.String())
	}
}

// permissionOf maps a request to the verb, group and resource RBAC checks,
// as the apiserver's request-info parser does for the paths a controller
// uses: /api/v1/... and /apis/GROUP/VERSION/..., namespaced or not.
func permissionOf(req *http.Request) (permission, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return permission{}, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return permission{}, false
	}
	resource, named := parts[0], len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	var verb string
	switch req.Method {
	case http.MethodGet:
		switch {
		case named:
			verb = "get"
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		return permission{}, false
	}
	return permission{group, resource, verb}, true
}

// grantedByShippedRBAC applies config/rbac (and the namespace its Role
// lives in) and returns every permission its rules grant.
func (e *env) grantedByShippedRBAC(t *testing.T) map[permission]bool {
	t.Helper()
	_, err := e.kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	objs := render(t, "rbac")
	e.apply(t, objs)
	granted := map[permission]bool{}
	for _, obj := range objs {
		var rules []rbacv1.PolicyRule
		switch obj.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &r); err != nil {
				t.Fatal(err)
			}
			rules = r.Rules
		case "Role":
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &r); err != nil {
				t.Fatal(err)
			}
			rules = r.Rules
		}
		for _, rule := range rules {
			if len(rule.NonResourceURLs) > 0 || len(rule.ResourceNames) > 0 {
				t.Fatalf("%s %s: non-resource URLs or resource names; this check does not expect them", obj.GetKind(), obj.GetName())
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						if g == "*" || res == "*" || v == "*" {
							t.Fatalf("%s %s grants a wildcard", obj.GetKind(), obj.GetName())
						}
						granted[permission{g, res, v}] = true
					}
				}
			}
		}
	}
	return granted
}

// waitAllowed waits until the apiserver's RBAC cache lets the service
// account do p in namespace ns.
func (e *env) waitAllowed(t *testing.T, p permission, ns string) {
	t.Helper()
	res, sub, _ := strings.Cut(p.resource, "/")
	e2etest.Eventually(t, "RBAC to allow "+p.String(), func(ctx context.Context) (bool, error) {
		r, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: controllerSA, Groups: controllerSAGroups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: p.group, Resource: res, Subresource: sub, Verb: p.verb, Namespace: ns}}},
			metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	})
}

// TestShippedRBACGrantsExactlyTheCallsTheControllerMakes runs the
// controller as its service account under the shipped config/rbac, leader
// elected, through every path that calls the apiserver: a scale-up large
// enough that client-go's recorder aggregates the Events (create, then
// patch), a pod released by a label change, pods orphaned and adopted by a
// re-created object (the uncached GET), a scale-down, and the lease
// released on shutdown. No request may be refused, and every granted verb
// must have been used: a verb the code never calls is dropped from the
// role. The roles used to grant get on pods and on rtresources/status,
// and Events in gantry-system twice; none of them is ever called.
func TestShippedRBACGrantsExactlyTheCallsTheControllerMakes(t *testing.T) {
	e := setup(t)
	granted := e.grantedByShippedRBAC(t)
	for p := range granted {
		ns := e.ns
		if p.group == "coordination.k8s.io" {
			ns = controllerNamespace
		}
		e.waitAllowed(t, p, ns)
	}

	rec := &callRecorder{used: map[permission]bool{}}
	cfg := rest.CopyConfig(e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA, Groups: controllerSAGroups}
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return recordingTransport{next: next, rec: rec} })
	engine, err := rtcontroller.NewEngine(rtcontroller.QueueRT, 1,
		rtqueue.PoolConfig{Min: 4, Max: 8, IdleThreshold: 2, Reserve: 1, ReserveFloor: 50}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rtcontroller.New(rtcontroller.Options{Config: cfg, Namespace: e.ns, Engine: engine, Component: "gantry-rbac-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	r := e.run(t, c, func(ctx context.Context) error {
		return c.RunLeaderElected(ctx, rtcontroller.LeaderElection{Namespace: controllerNamespace, Name: "gantry-rbac-" + e.ns,
			Identity: "rbac-e2e", ReleaseOnCancel: true})
	})

	ctx := context.Background()
	// 12 pods: more than the 10 similar Events after which client-go's
	// correlator aggregates them and patches the aggregate.
	rt := e.create(t, e.newRT("web", 12, 60))
	e.waitReady(t, "web", 12)

	pod := e.anyOwnedPod(t, rt)
	e.patchPod(t, pod.Name, `[{"op":"replace","path":"/metadata/labels/app","value":"debug"}]`)
	e2etest.Eventually(t, "the relabelled pod to be released", func(ctx context.Context) (bool, error) {
		p, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && metav1.GetControllerOf(p) == nil, err
	})
	e.waitReady(t, "web", 12)

	if err := e.rts.Namespace(e.ns).Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, "the pods to be orphaned", func(ctx context.Context) (bool, error) {
		pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if metav1.GetControllerOf(&p) != nil {
				return false, nil
			}
		}
		_, err = e.rts.Namespace(e.ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	e.create(t, e.newRT("web", 2, 60)) // adopts 2 of the 12, deletes the other 10
	e.waitReady(t, "web", 2)
	r.stop(t)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.forbidden) > 0 {
		t.Errorf("the shipped RBAC refused %d requests: %v", len(rec.forbidden), rec.forbidden)
	}
	if len(rec.other) > 0 {
		t.Errorf("requests outside the resource API: %v", rec.other)
	}
	var missing, unused []string
	for p := range rec.used {
		if !granted[p] {
			missing = append(missing, p.String())
		}
	}
	for p := range granted {
		if !rec.used[p] {
			unused = append(unused, p.String())
		}
	}
	slices.Sort(missing)
	slices.Sort(unused)
	if len(missing) > 0 {
		t.Errorf("the controller used permissions the shipped RBAC does not grant: %v", missing)
	}
	if len(unused) > 0 {
		t.Errorf("the shipped RBAC grants permissions the controller never used: %v", unused)
	}
	t.Logf("the controller used exactly the %d permissions the shipped RBAC grants", len(rec.used))
}
