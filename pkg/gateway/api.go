package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// maxAPIBody bounds a management request's JSON.
const maxAPIBody = 1 << 20

// deployment is OpenFaaS's FunctionDeployment request, field for field
// (faas-provider's types.FunctionDeployment); a field it does not have is
// refused, not dropped.
type deployment struct {
	Service     string            `json:"service"`
	Image       string            `json:"image"`
	Namespace   string            `json:"namespace,omitempty"`
	EnvProcess  string            `json:"envProcess,omitempty"`
	EnvVars     map[string]string `json:"envVars,omitempty"`
	Constraints []string          `json:"constraints,omitempty"`
	Secrets     []string          `json:"secrets,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Limits      *resources        `json:"limits,omitempty"`
	Requests    *resources        `json:"requests,omitempty"`
	ReadOnly    bool              `json:"readOnlyRootFilesystem,omitempty"`
}

// resources is OpenFaaS's FunctionResources. Gantry runs no GPU
// functions: a GPU request is refused.
type resources struct {
	stack.Resources
	NvidiaGPU string `json:"nvidia.com/gpu,omitempty"`
	AmdGPU    string `json:"amd.com/gpu,omitempty"`
	IntelGPU  string `json:"intel.com/gpu,omitempty"`
}

func (r *resources) get(field string) (stack.Resources, error) {
	if r == nil {
		return stack.Resources{}, nil
	}
	if r.NvidiaGPU != "" || r.AmdGPU != "" || r.IntelGPU != "" {
		return stack.Resources{}, fmt.Errorf("%w: %s: GPUs are not supported by this gateway", stack.ErrInvalid, field)
	}
	return r.Resources, nil
}

func toResources(r stack.Resources) *resources {
	if r.IsZero() {
		return nil
	}
	return &resources{Resources: r}
}

// functionStatus is OpenFaaS's FunctionStatus (faas-provider's
// types.FunctionStatus), with Gantry's fields added. Every field of the
// deployment comes back as it was declared, so faas-cli describe and diff
// see what was deployed.
type functionStatus struct {
	Name                   string            `json:"name"`
	Image                  string            `json:"image"`
	Namespace              string            `json:"namespace"`
	EnvProcess             string            `json:"envProcess,omitempty"`
	EnvVars                map[string]string `json:"envVars,omitempty"`
	Constraints            []string          `json:"constraints,omitempty"`
	Secrets                []string          `json:"secrets,omitempty"`
	Labels                 map[string]string `json:"labels,omitempty"`
	Annotations            map[string]string `json:"annotations,omitempty"`
	Limits                 *resources        `json:"limits,omitempty"`
	Requests               *resources        `json:"requests,omitempty"`
	ReadOnlyRootFilesystem bool              `json:"readOnlyRootFilesystem,omitempty"`
	InvocationCount        float64           `json:"invocationCount"`
	Replicas               uint64            `json:"replicas"`
	AvailableReplicas      uint64            `json:"availableReplicas"`
	CreatedAt              time.Time         `json:"createdAt"`
	// Gantry's own.
	SLO         string  `json:"slo"`
	Criticality int     `json:"criticality"`
	MinScale    int     `json:"minScale"`
	MaxScale    int     `json:"maxScale"`
	Queued      int     `json:"queued"`
	Running     int     `json:"running"`
	App         string  `json:"app,omitempty"`
	ColdStartMS float64 `json:"coldStartMs"`
	// State is ready, starting, backoff (crash-looping), failed or idle;
	// Restarts counts failed starts and crashes, Reason is the last exit
	// reason, BackOffUntil when a crash loop's back-off ends.
	State        string     `json:"state"`
	Restarts     int        `json:"restarts"`
	Reason       string     `json:"reason,omitempty"`
	BackOffUntil *time.Time `json:"backOffUntil,omitempty"`
	// Which limits hold and what the memory watchdog killed (status.go).
	stateFields
}

func toStatus(s dispatch.FunctionStatus) functionStatus {
	f := s.Decl
	return functionStatus{Name: f.Name, Image: f.Image, Namespace: f.NamespaceOrDefault(), EnvProcess: f.Command,
		EnvVars: f.Env, Constraints: f.Constraints, Secrets: f.Secrets, Labels: f.Labels, Annotations: f.Annotations,
		Limits: toResources(f.Limits), Requests: toResources(f.Requests), ReadOnlyRootFilesystem: f.ReadOnlyRootFilesystem,
		InvocationCount: float64(s.Stats.Completed), Replicas: uint64(s.Replicas), AvailableReplicas: uint64(s.Available),
		CreatedAt: s.CreatedAt,
		SLO:       f.SLO.String(), Criticality: f.Criticality, MinScale: f.MinScale, MaxScale: f.MaxScale,
		Queued: s.Queued, Running: s.Running, App: s.App, ColdStartMS: ms(s.ColdStart),
		State: s.State, Restarts: s.Restarts, Reason: s.Reason, BackOffUntil: timeOrNil(s.BackOffUntil)}
}

// status is toStatus with what limits.go adds (status.go).
func (g *Gateway) status(s dispatch.FunctionStatus) functionStatus {
	st := toStatus(s)
	// Every invocation answered counts, as in OpenFaaS (faas-cli
	// describe): before, only those an instance answered, so a 502, 504 or
	// 429 did not.
	st.InvocationCount = float64(g.metrics.answeredCount(s.Decl.Qualified()))
	st.stateFields = g.stateFieldsOf(s.Decl)
	return st
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// listFunctions lists one namespace's functions, ?namespace= or the
// default, as OpenFaaS lists them.
func (g *Gateway) listFunctions(w http.ResponseWriter, r *http.Request) {
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = stack.DefaultNamespace
	}
	if !g.ns.exists(r.Context(), ns) {
		http.Error(w, fmt.Sprintf("namespace %q not found", ns), http.StatusNotFound)
		return
	}
	out := []functionStatus{}
	for _, s := range g.d.Functions() {
		if s.Decl.NamespaceOrDefault() == ns {
			out = append(out, g.status(s))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) getFunction(w http.ResponseWriter, r *http.Request) {
	ref, err := refOf(r.PathValue("name"), r.URL.Query().Get("namespace"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s, ok := g.d.Function(ref)
	if !ok {
		http.Error(w, fmt.Sprintf("function %q not found", stack.QualifiedRef(ref)), http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, g.status(s))
}

// onlyParams refuses a request whose query has a parameter not in allowed,
// or one of them twice: either would otherwise be answered as if absent
// (a misspelt ?namesapce=dev listing openfaas-fn).
func onlyParams(h http.HandlerFunc, allowed ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range r.URL.Query() {
			switch {
			case !slices.Contains(allowed, k):
				takes := "none"
				if len(allowed) > 0 {
					takes = "only " + strings.Join(allowed, ", ")
				}
				http.Error(w, fmt.Sprintf("unknown query parameter %q: %s %s takes %s", k, r.Method, r.URL.Path, takes), http.StatusBadRequest)
				return
			case len(vs) > 1:
				http.Error(w, fmt.Sprintf("query parameter %q is given %d times: give it once", k, len(vs)), http.StatusBadRequest)
				return
			}
		}
		h(w, r)
	}
}

// requestNamespace is the namespace a request's body names, else its
// ?namespace=; both, different, are refused rather than one dropped.
func requestNamespace(r *http.Request, body string) (string, error) {
	q := r.URL.Query().Get("namespace")
	if q != "" && body != "" && q != body {
		return "", fmt.Errorf("%w: the body names namespace %q, the query %q", stack.ErrInvalid, body, q)
	}
	return firstNonEmpty(body, q), nil
}

// refOf is the registry key of a function a client names: NAME or
// NAME.NAMESPACE, and maybe a namespace beside it (?namespace= or a
// request's field), which must agree.
func refOf(name, namespace string) (string, error) {
	n, ns := stack.SplitRef(name)
	if strings.Contains(name, ".") && namespace != "" && namespace != ns {
		return "", fmt.Errorf("%w: %q names namespace %q, and the request namespace %q", stack.ErrInvalid, name, ns, namespace)
	}
	if !strings.Contains(name, ".") && namespace != "" {
		ns = namespace
	}
	if err := stack.CheckName(n); err != nil {
		return "", err
	}
	if err := stack.CheckName(ns); err != nil {
		return "", fmt.Errorf("namespace: %w", err)
	}
	return stack.Ref(n, ns), nil
}

// Resolve finds the deployed function a route names: NAME or
// NAME.NAMESPACE (faas-cli's /function/NAME.NAMESPACE and
// /async-function/NAME.NAMESPACE). The declaration's Ref is the
// dispatcher's key (dispatch.Request.Function) and Qualified its metrics
// label.
func (g *Gateway) Resolve(name string) (stack.Function, bool) {
	return g.d.Lookup(stack.CanonicalRef(name))
}

func (g *Gateway) deployFunction(w http.ResponseWriter, r *http.Request) {
	g.applyDeployment(w, r, false)
}
func (g *Gateway) updateFunction(w http.ResponseWriter, r *http.Request) {
	g.applyDeployment(w, r, true)
}

func (g *Gateway) applyDeployment(w http.ResponseWriter, r *http.Request, update bool) {
	var req deployment
	if !readJSONStrict(w, r, &req) {
		return
	}
	ns, err := requestNamespace(r, req.Namespace)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The namespace is kept in the stored request, as if the body had
	// named it.
	req.Namespace = ns
	f, err := req.function()
	if err == nil && !g.ns.exists(r.Context(), f.NamespaceOrDefault()) {
		err = fmt.Errorf("%w: namespace %q does not exist; create it first (faas-cli namespace create %s)", stack.ErrInvalid, f.Namespace, f.Namespace)
	}
	if err == nil {
		err = g.checkSecretsExist(r.Context(), f)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.store.lock()
	defer g.store.unlock()
	if update {
		err = g.d.Update(r.Context(), f)
	} else {
		err = g.d.Deploy(r.Context(), f)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	created := time.Now()
	if st, ok := g.d.Function(f.Ref()); ok {
		created = st.CreatedAt
	}
	if err := g.store.saveDeployment(f.Ref(), req, created); err != nil {
		g.persistFailed(w, functionWhat(f.Ref()), err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// persistFailed answers a change the dispatcher made but the state folder
// could not keep: it is served now and lost at the next restart.
// What names the changed object: function "NAME", app "NAME", namespace
// "NAME".
func (g *Gateway) persistFailed(w http.ResponseWriter, what string, err error) {
	g.cfg.Logger.Error("the change is served but not kept in the state folder", "changed", what, "err", err)
	http.Error(w, fmt.Sprintf("%s changed, but the state folder could not keep the change, so a restart loses it: %v", what, err),
		http.StatusInternalServerError)
}

func functionWhat(ref string) string { return fmt.Sprintf("function %q", ref) }

func (req *deployment) function() (stack.Function, error) {
	limits, err := req.Limits.get("limits")
	if err != nil {
		return stack.Function{}, err
	}
	requests, err := req.Requests.get("requests")
	if err != nil {
		return stack.Function{}, err
	}
	return stack.FromDeployment(stack.Deployment{Service: req.Service, Image: req.Image, Namespace: req.Namespace,
		EnvProcess: req.EnvProcess, EnvVars: req.EnvVars, Labels: req.Labels, Annotations: req.Annotations,
		Secrets: req.Secrets, Constraints: req.Constraints, Limits: limits, Requests: requests,
		ReadOnlyRootFilesystem: req.ReadOnly})
}

func (g *Gateway) deleteFunction(w http.ResponseWriter, r *http.Request) {
	var req struct {
		FunctionName string `json:"functionName"`
		Namespace    string `json:"namespace"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if req.FunctionName == "" {
		http.Error(w, "functionName is required", http.StatusBadRequest)
		return
	}
	var ref string
	ns, err := requestNamespace(r, req.Namespace)
	if err == nil {
		ref, err = refOf(req.FunctionName, ns)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.store.lock()
	defer g.store.unlock()
	if err := g.d.Remove(r.Context(), ref); err != nil {
		writeError(w, err)
		return
	}
	g.metrics.forget(stack.QualifiedRef(ref))
	g.logs.Drop(ref)
	g.limits.forget(stack.QualifiedRef(ref))
	if err := g.store.remove(ref); err != nil {
		g.persistFailed(w, functionWhat(ref), err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (g *Gateway) scaleFunction(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ServiceName string `json:"serviceName"`
		Namespace   string `json:"namespace"`
		Replicas    *int64 `json:"replicas"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	var ref string
	ns, err := requestNamespace(r, req.Namespace)
	if err == nil {
		ref, err = refOf(r.PathValue("name"), ns)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name, _ := stack.SplitRef(ref)
	switch {
	case req.Replicas == nil:
		http.Error(w, "replicas is required", http.StatusBadRequest)
		return
	case req.ServiceName != "" && stack.CanonicalRef(req.ServiceName) != ref && req.ServiceName != name:
		http.Error(w, fmt.Sprintf("serviceName %q does not match the path's %q", req.ServiceName, r.PathValue("name")), http.StatusBadRequest)
		return
	case *req.Replicas < 0 || *req.Replicas > stack.MaxInstances:
		http.Error(w, fmt.Sprintf("replicas %d must be in [0, %d]", *req.Replicas, stack.MaxInstances), http.StatusBadRequest)
		return
	}
	g.store.lock()
	defer g.store.unlock()
	if err := g.d.Scale(ref, int(*req.Replicas)); err != nil {
		writeError(w, err)
		return
	}
	if err := g.store.saveReplicas(ref, int(*req.Replicas)); err != nil {
		g.persistFailed(w, functionWhat(ref), err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// appJSON is an app over the API.
type appJSON struct {
	Name      string   `json:"name"`
	Functions []string `json:"functions"`
	SLO       string   `json:"slo,omitempty"`
	// Budgets are each function's cumulative SLO budget, in the chain's order.
	Budgets []string `json:"budgets,omitempty"`
}

func toAppJSON(a dispatch.AppInfo) appJSON {
	out := appJSON{Name: a.Name, Functions: a.Functions, SLO: a.SLO.String()}
	for _, b := range a.Budget {
		out.Budgets = append(out.Budgets, b.String())
	}
	return out
}

func (g *Gateway) listApps(w http.ResponseWriter, _ *http.Request) {
	out := []appJSON{}
	for _, a := range g.d.Apps() {
		out = append(out, toAppJSON(a))
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) getApp(w http.ResponseWriter, r *http.Request) {
	a, ok := g.d.App(r.PathValue("name"))
	if !ok {
		http.Error(w, fmt.Sprintf("app %q not found", r.PathValue("name")), http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, toAppJSON(a))
}

func (g *Gateway) deployApp(w http.ResponseWriter, r *http.Request) {
	var req appJSON
	if !readJSON(w, r, &req) {
		return
	}
	a, err := req.app()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.store.lock()
	defer g.store.unlock()
	if err := g.d.DeployApp(a); err != nil {
		writeError(w, err)
		return
	}
	// Kept as deployed, without the budgets the dispatcher works out.
	if err := g.appStore.save(a.Name, appJSON{Name: req.Name, Functions: req.Functions, SLO: req.SLO}); err != nil {
		g.persistFailed(w, fmt.Sprintf("app %q", a.Name), err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// app is the stack's App that a request or a stored file declares.
func (req appJSON) app() (stack.App, error) {
	a := stack.App{Name: req.Name, Functions: req.Functions}
	if len(req.Budgets) > 0 {
		return a, errors.New("budgets are what the gateway derives from the app's slo and its functions' slos; give slo alone")
	}
	if req.SLO != "" {
		d, err := time.ParseDuration(req.SLO)
		if err != nil {
			return a, fmt.Errorf("slo: %v", err)
		}
		a.SLO = d
	}
	return a, nil
}

func (g *Gateway) deleteApp(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	g.store.lock()
	defer g.store.unlock()
	if err := g.d.RemoveApp(name); err != nil {
		writeError(w, err)
		return
	}
	if err := g.appStore.remove(name); err != nil {
		g.persistFailed(w, fmt.Sprintf("app %q", name), err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// Version is reported by /system/info; the build may set it.
var Version = "dev"

func (g *Gateway) info(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"provider": map[string]any{"provider": "gantry", "orchestration": g.cfg.Orchestration,
			"version": map[string]string{"release": Version, "sha": ""}},
		"version": map[string]string{"release": Version, "sha": ""},
		"arch":    runtime.GOARCH,
		"policy":  g.d.Policy(),
	})
}

// readJSON decodes a bounded JSON body, answering 400 or 413 itself. A
// field v does not have, or anything after the one JSON value, is refused:
// every field a client sends is honoured or refused, never dropped.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeJSON(w, r, v, maxAPIBody)
}

// readJSONStrict is readJSON; the name stays for the callers that always
// refused unknown fields.
func readJSONStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeJSON(w, r, v, maxAPIBody)
}

// errTrailing is a body with more after its JSON value.
var errTrailing = errors.New("more data after the JSON value")

func decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, tail := dec.Token(); tail != io.EOF {
			err = errTrailing
			if tail != nil && !errors.Is(tail, io.EOF) {
				err = tail
			}
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if f := bodyFailure(err); f != nil {
			// A stalled body or a drain: the same answer as a function's.
			failHeaders(w.Header(), f)
			http.Error(w, f.err.Error(), f.status)
			return false
		}
		switch {
		case errors.As(err, &tooBig):
			http.Error(w, fmt.Sprintf("request body larger than %d bytes", limit), http.StatusRequestEntityTooLarge)
		case errors.Is(err, io.EOF):
			http.Error(w, "empty request body; want JSON", http.StatusBadRequest)
		default:
			http.Error(w, fmt.Sprintf("invalid JSON: %v", err), http.StatusBadRequest)
		}
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError maps the dispatcher's errors to HTTP statuses.
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, stack.ErrInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, dispatch.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, dispatch.ErrExists), errors.Is(err, dispatch.ErrRefused), errors.Is(err, dispatch.ErrInUse):
		code = http.StatusConflict
	case errors.Is(err, dispatch.ErrQueueFull):
		w.Header().Set("Retry-After", "1")
		code = http.StatusTooManyRequests
	case errors.Is(err, dispatch.ErrClosed), errors.Is(err, dispatch.ErrRemoved):
		code = http.StatusServiceUnavailable
	case errors.Is(err, dispatch.ErrStartFailed):
		code = http.StatusServiceUnavailable
	}
	http.Error(w, err.Error(), code)
}
