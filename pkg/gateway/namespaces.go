package gateway

// Function namespaces, as OpenFaaS's API has them: /system/namespaces
// lists them and /system/namespace/NAME creates (POST), reads (GET),
// updates (PUT) and deletes (DELETE) one, with faas-provider's
// FunctionNamespace as the body. The default namespace always exists; a
// namespace that holds a function exists while it does (a stack file may
// declare functions in any namespace); the others are the ones created
// here. Functions are keyed by name and namespace in the dispatcher
// (stack.Ref); this only decides which namespaces a deploy may name.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// MaxNamespaces bounds the namespaces created over the API.
const MaxNamespaces = 1000

// functionNamespace is faas-provider's types.FunctionNamespace.
type functionNamespace struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// namespaceBackend is a backend with namespaces of its own (the
// Kubernetes backend: Kubernetes namespaces marked openfaas=1): they are
// function namespaces too, and the API's namespace CRUD creates, changes
// and deletes them.
type namespaceBackend interface {
	FunctionNamespaces(ctx context.Context) ([]string, error)
	CreateNamespace(ctx context.Context, name string, labels, annotations map[string]string) (existed bool, err error)
	UpdateNamespace(ctx context.Context, name string, labels, annotations map[string]string) error
	DeleteNamespace(ctx context.Context, name string) error
}

// namespaces holds the namespaces created over the API.
type namespaces struct {
	d *dispatch.Dispatcher
	// be is the backend's namespaces; nil for a backend without.
	be namespaceBackend
	// mu guards created.
	mu      sync.Mutex
	created map[string]functionNamespace
}

func newNamespaces(d *dispatch.Dispatcher) *namespaces {
	return &namespaces{d: d, created: map[string]functionNamespace{}}
}

// inUse is the namespaces that hold a function, with how many.
func (n *namespaces) inUse() map[string]int {
	out := map[string]int{}
	for _, s := range n.d.Functions() {
		out[s.Decl.NamespaceOrDefault()]++
	}
	return out
}

func (n *namespaces) exists(ctx context.Context, name string) bool {
	_, ok := n.get(ctx, name)
	return ok
}

// inBackend reports whether the backend has the namespace (false when it
// cannot say).
func (n *namespaces) inBackend(ctx context.Context, name string) bool {
	if n.be == nil {
		return false
	}
	names, err := n.be.FunctionNamespaces(ctx)
	return err == nil && slices.Contains(names, name)
}

func (n *namespaces) get(ctx context.Context, name string) (functionNamespace, bool) {
	n.mu.Lock()
	ns, ok := n.created[name]
	n.mu.Unlock()
	if ok {
		return cloneNamespace(ns), true
	}
	if name == stack.DefaultNamespace || n.inUse()[name] > 0 || n.inBackend(ctx, name) {
		return functionNamespace{Name: name}, true
	}
	return functionNamespace{}, false
}

func (n *namespaces) list(ctx context.Context) ([]string, error) {
	set := n.inUse()
	set[stack.DefaultNamespace]++
	if n.be != nil {
		names, err := n.be.FunctionNamespaces(ctx)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			set[name]++
		}
	}
	n.mu.Lock()
	for name := range n.created {
		set[name]++
	}
	n.mu.Unlock()
	return slices.Sorted(maps.Keys(set)), nil
}

func cloneNamespace(ns functionNamespace) functionNamespace {
	ns.Labels, ns.Annotations = maps.Clone(ns.Labels), maps.Clone(ns.Annotations)
	return ns
}

func (g *Gateway) listNamespaces(w http.ResponseWriter, r *http.Request) {
	list, err := g.ns.list(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (g *Gateway) getNamespace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ns, ok := g.ns.get(r.Context(), name)
	if !ok {
		http.Error(w, fmt.Sprintf("namespace %q not found", name), http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, ns)
}

// createNamespace answers POST /system/namespace/ (the name in the body,
// as faas-cli sends it) and POST /system/namespace/NAME.
func (g *Gateway) createNamespace(w http.ResponseWriter, r *http.Request) {
	ns, ok := g.readNamespace(w, r)
	if !ok {
		return
	}
	inUse := g.ns.inUse()
	g.ns.mu.Lock()
	defer g.ns.mu.Unlock()
	if _, ok := g.ns.created[ns.Name]; ok || ns.Name == stack.DefaultNamespace || inUse[ns.Name] > 0 {
		http.Error(w, fmt.Sprintf("namespace %q already exists", ns.Name), http.StatusConflict)
		return
	}
	if len(g.ns.created) >= MaxNamespaces {
		http.Error(w, fmt.Sprintf("this gateway already has %d namespaces, the most it takes", MaxNamespaces), http.StatusBadRequest)
		return
	}
	if g.ns.be != nil {
		existed, err := g.ns.be.CreateNamespace(r.Context(), ns.Name, ns.Labels, ns.Annotations)
		switch {
		case err != nil:
			http.Error(w, fmt.Sprintf("creating namespace %q: %v", ns.Name, err), http.StatusBadGateway)
			return
		case existed:
			http.Error(w, fmt.Sprintf("namespace %q already exists in the cluster", ns.Name), http.StatusConflict)
			return
		}
	}
	g.ns.created[ns.Name] = ns
	if err := g.nsStore.save(ns.Name, ns); err != nil {
		g.persistFailed(w, fmt.Sprintf("namespace %q", ns.Name), err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

func (g *Gateway) updateNamespace(w http.ResponseWriter, r *http.Request) {
	ns, ok := g.readNamespace(w, r)
	if !ok {
		return
	}
	if ns.Name == stack.DefaultNamespace {
		http.Error(w, fmt.Sprintf("namespace %q is the default and keeps no labels or annotations", ns.Name), http.StatusBadRequest)
		return
	}
	if !g.ns.exists(r.Context(), ns.Name) {
		http.Error(w, fmt.Sprintf("namespace %q not found", ns.Name), http.StatusNotFound)
		return
	}
	g.ns.mu.Lock()
	defer g.ns.mu.Unlock()
	if g.ns.be != nil {
		if err := g.ns.be.UpdateNamespace(r.Context(), ns.Name, ns.Labels, ns.Annotations); err != nil {
			backendNamespaceError(w, ns.Name, err)
			return
		}
	}
	g.ns.created[ns.Name] = ns
	if err := g.nsStore.save(ns.Name, ns); err != nil {
		g.persistFailed(w, fmt.Sprintf("namespace %q", ns.Name), err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (g *Gateway) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	switch n := g.ns.inUse()[name]; {
	case name == stack.DefaultNamespace:
		http.Error(w, fmt.Sprintf("namespace %q is the default and cannot be deleted", name), http.StatusBadRequest)
		return
	case n > 0:
		http.Error(w, fmt.Sprintf("namespace %q still holds %d functions; remove them first", name, n), http.StatusConflict)
		return
	}
	g.ns.mu.Lock()
	defer g.ns.mu.Unlock()
	_, ok := g.ns.created[name]
	if g.ns.be != nil {
		if !ok && !g.ns.inBackend(r.Context(), name) {
			http.Error(w, fmt.Sprintf("namespace %q not found", name), http.StatusNotFound)
			return
		}
		if err := g.ns.be.DeleteNamespace(r.Context(), name); err != nil {
			backendNamespaceError(w, name, err)
			return
		}
		ok = true
	}
	delete(g.ns.created, name)
	if !ok {
		http.Error(w, fmt.Sprintf("namespace %q not found", name), http.StatusNotFound)
		return
	}
	if err := g.nsStore.remove(name); err != nil {
		g.persistFailed(w, fmt.Sprintf("namespace %q", name), err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// readNamespace reads a FunctionNamespace body. The path's name and the
// body's must agree; either may be left out.
func (g *Gateway) readNamespace(w http.ResponseWriter, r *http.Request) (functionNamespace, bool) {
	var ns functionNamespace
	if !readJSONStrict(w, r, &ns) {
		return ns, false
	}
	path := r.PathValue("name")
	switch {
	case ns.Name == "":
		ns.Name = path
	case path != "" && path != ns.Name:
		http.Error(w, fmt.Sprintf("the body names namespace %q, the path %q", ns.Name, path), http.StatusBadRequest)
		return ns, false
	}
	if err := stack.CheckName(ns.Name); err != nil {
		http.Error(w, "namespace: "+err.Error(), http.StatusBadRequest)
		return ns, false
	}
	if len(ns.Labels) > stack.MaxEnv || len(ns.Annotations) > stack.MaxEnv {
		http.Error(w, fmt.Sprintf("at most %d labels and %d annotations", stack.MaxEnv, stack.MaxEnv), http.StatusBadRequest)
		return ns, false
	}
	for kind, m := range map[string]map[string]string{"label": ns.Labels, "annotation": ns.Annotations} {
		if err := stack.CheckMetaKeys(kind, m); err != nil {
			http.Error(w, fmt.Sprintf("namespace %q: %v", ns.Name, err), http.StatusBadRequest)
			return ns, false
		}
	}
	return ns, true
}

func backendNamespaceError(w http.ResponseWriter, name string, err error) {
	code := http.StatusBadGateway
	if errors.Is(err, stack.ErrInvalid) {
		code = http.StatusConflict
	}
	http.Error(w, fmt.Sprintf("namespace %q: %v", name, err), code)
}
