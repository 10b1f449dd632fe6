package knativeingress

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ours is one Ingress of the served class, with what routing it made of.
type ours struct {
	obj *unstructured.Unstructured
	ing *Ingress
	err error // why it is not routed; nil when it is
}

// sync rebuilds the table from the caches, swaps it in, then writes the
// statuses that changed.
func (c *Controller) sync(ctx context.Context) error {
	list := c.collect()
	t := newTable()
	var certs certSource
	if c.certs != nil {
		certs = c.certs
	}
	for _, o := range list {
		if o.err == nil {
			o.err = t.add(o.ing, c.cfg.ClusterDomain, certs)
		}
	}
	c.router.table.Store(t)
	if c.certs != nil {
		c.certs.forget()
	}
	var errs []error
	for _, o := range list {
		if err := c.writeStatus(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// collect lists the Ingresses of the served class, oldest first (then by
// namespace and name): when two claim a host, the older one's rules come
// first.
func (c *Controller) collect() []*ours {
	def := c.defaultClass()
	var list []*ours
	for _, x := range c.ingInf.GetStore().List() {
		u, ok := x.(*unstructured.Unstructured)
		if !ok || u.GetDeletionTimestamp() != nil {
			continue
		}
		ing, err := fromUnstructured(u.Object)
		if err != nil {
			list = append(list, &ours{obj: u, ing: &Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(),
				Annotations: u.GetAnnotations()}}, err: err})
			continue
		}
		list = append(list, &ours{obj: u, ing: ing})
	}
	list = slices.DeleteFunc(list, func(o *ours) bool { return ClassOf(o.ing, def) != c.cfg.Class })
	slices.SortFunc(list, func(a, b *ours) int {
		if d := a.obj.GetCreationTimestamp().Compare(b.obj.GetCreationTimestamp().Time); d != 0 {
			return d
		}
		return strings.Compare(a.obj.GetNamespace()+"/"+a.obj.GetName(), b.obj.GetNamespace()+"/"+b.obj.GetName())
	})
	return list
}

// defaultClass is config-network's ingress-class (else its older
// ingress.class key), the class of Ingresses without the annotation.
func (c *Controller) defaultClass() string {
	for _, x := range c.cmInf.GetStore().List() {
		cm, ok := x.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		if v := cm.Data[configClassKey]; v != "" {
			return v
		}
		return cm.Data[configClassKeyOld]
	}
	return ""
}

// writeStatus writes o's status when it differs from what it should be.
func (c *Controller) writeStatus(ctx context.Context, o *ours) error {
	old, _, _ := unstructured.NestedMap(o.obj.Object, "status")
	want := c.status(o, old, time.Now())
	if equality.Semantic.DeepEqual(old, want) {
		return nil
	}
	u := o.obj.DeepCopy()
	if err := unstructured.SetNestedMap(u.Object, want, "status"); err != nil {
		return err
	}
	_, err := c.cfg.Dynamic.Resource(GVR).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; its removal comes as an event
	}
	return err
}

// status is the Ingress's status as Knative's Ingress lifecycle would
// set it (knative.dev/networking ingress_lifecycle.go): NetworkConfigured
// and LoadBalancerReady, and Ready from both; the load balancers; the
// generation observed. Conditions keep their transition time while their
// status stays; other fields of the old status (annotations) are kept.
func (c *Controller) status(o *ours, old map[string]any, now time.Time) map[string]any {
	want := map[string]any{}
	if a, ok := old["annotations"]; ok {
		want["annotations"] = a
	}
	want["observedGeneration"] = o.obj.GetGeneration()
	var conds []map[string]any
	if o.err != nil {
		msg, reason := o.err.Error(), reasonOf(o.err)
		conds = []map[string]any{
			{"type": "LoadBalancerReady", "status": "Unknown", "reason": "Uninitialized", "message": "Waiting for load balancer to be ready"},
			{"type": "NetworkConfigured", "status": "False", "reason": reason, "message": msg},
			{"type": "Ready", "status": "False", "reason": reason, "message": msg},
		}
	} else {
		conds = []map[string]any{{"type": "LoadBalancerReady", "status": "True"}, {"type": "NetworkConfigured", "status": "True"},
			{"type": "Ready", "status": "True"}}
		want["publicLoadBalancer"] = loadBalancer(c.cfg.PublicLoadBalancer)
		want["privateLoadBalancer"] = loadBalancer(c.cfg.PrivateLoadBalancer)
	}
	stamp := now.UTC().Format(time.RFC3339)
	list := make([]any, 0, len(conds))
	for _, cond := range conds {
		cond["lastTransitionTime"] = transitionTime(old, cond, stamp)
		list = append(list, cond)
	}
	want["conditions"] = list
	return want
}

// transitionTime is the old condition's time if its status is the same.
func transitionTime(old map[string]any, cond map[string]any, now string) string {
	list, _, _ := unstructured.NestedSlice(old, "conditions")
	for _, x := range list {
		m, ok := x.(map[string]any)
		if ok && m["type"] == cond["type"] && m["status"] == cond["status"] {
			if t, ok := m["lastTransitionTime"].(string); ok {
				return t
			}
		}
	}
	return now
}

// loadBalancer is a LoadBalancerStatus with one address: an IP address
// in ip, a name in domainInternal.
func loadBalancer(addr string) map[string]any {
	key := "domainInternal"
	if _, err := netip.ParseAddr(addr); err == nil {
		key = "ip"
	}
	return map[string]any{"ingress": []any{map[string]any{key: addr}}}
}
