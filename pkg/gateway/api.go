package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"time"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// maxAPIBody bounds a management request's JSON.
const maxAPIBody = 1 << 20

// namespace is the one namespace the local runtime has, named as OpenFaaS
// names its function namespace so clients that pass it keep working.
const namespace = "openfaas-fn"

// deployment is OpenFaaS's FunctionDeployment request.
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
	Limits      map[string]string `json:"limits,omitempty"`
	Requests    map[string]string `json:"requests,omitempty"`
	ReadOnly    bool              `json:"readOnlyRootFilesystem,omitempty"`
}

// functionStatus is OpenFaaS's FunctionStatus, with Gantry's fields added.
type functionStatus struct {
	Name              string            `json:"name"`
	Image             string            `json:"image"`
	Namespace         string            `json:"namespace"`
	EnvProcess        string            `json:"envProcess,omitempty"`
	EnvVars           map[string]string `json:"envVars,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	InvocationCount   float64           `json:"invocationCount"`
	Replicas          uint64            `json:"replicas"`
	AvailableReplicas uint64            `json:"availableReplicas"`
	// Gantry's own.
	SLO         string  `json:"slo"`
	Criticality int     `json:"criticality"`
	MinScale    int     `json:"minScale"`
	MaxScale    int     `json:"maxScale"`
	Queued      int     `json:"queued"`
	Running     int     `json:"running"`
	App         string  `json:"app,omitempty"`
	ColdStartMS float64 `json:"coldStartMs"`
	// OpenFaaS's fields that secrets and limits fill (status.go).
	stateFields
}

func toStatus(s dispatch.FunctionStatus) functionStatus {
	f := s.Decl
	return functionStatus{Name: f.Name, Image: f.Image, Namespace: namespace, EnvProcess: f.Command,
		EnvVars: f.Env, Labels: f.Labels, Annotations: f.Annotations,
		InvocationCount: float64(s.Stats.Completed), Replicas: uint64(s.Replicas), AvailableReplicas: uint64(s.Available),
		SLO: f.SLO.String(), Criticality: f.Criticality, MinScale: f.MinScale, MaxScale: f.MaxScale,
		Queued: s.Queued, Running: s.Running, App: s.App, ColdStartMS: ms(s.ColdStart)}
}

// status is toStatus with the fields of secrets and limits (status.go).
func (g *Gateway) status(s dispatch.FunctionStatus) functionStatus {
	st := toStatus(s)
	st.stateFields = g.stateFieldsOf(s.Decl)
	return st
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (g *Gateway) listFunctions(w http.ResponseWriter, _ *http.Request) {
	all := g.d.Functions()
	out := make([]functionStatus, 0, len(all))
	for _, s := range all {
		out = append(out, g.status(s))
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) getFunction(w http.ResponseWriter, r *http.Request) {
	s, ok := g.d.Function(trimNamespace(r.PathValue("name")))
	if !ok {
		http.Error(w, fmt.Sprintf("function %q not found", r.PathValue("name")), http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, g.status(s))
}

func (g *Gateway) deployFunction(w http.ResponseWriter, r *http.Request) {
	g.applyDeployment(w, r, false)
}
func (g *Gateway) updateFunction(w http.ResponseWriter, r *http.Request) {
	g.applyDeployment(w, r, true)
}

func (g *Gateway) applyDeployment(w http.ResponseWriter, r *http.Request, update bool) {
	var req deployment
	if !readJSON(w, r, &req) {
		return
	}
	f, err := g.functionOf(req)
	if err == nil {
		err = g.checkSecretsExist(f)
	}
	if err == nil {
		err = g.checkLocal(f)
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
	if err := g.store.saveDeployment(req); err != nil {
		g.persistFailed(w, f.Name, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// functionOf builds the function a deployment request declares; the API
// and the functions restored from the state folder share it.
func (g *Gateway) functionOf(req deployment) (stack.Function, error) {
	f, err := stack.FromAPI(req.Service, req.Image, req.EnvProcess, req.EnvVars, req.Labels, req.Annotations)
	if err != nil {
		return f, err
	}
	f.Secrets = req.Secrets
	f.ReadOnlyRootFS = req.ReadOnly
	if f.Limits, err = stack.ResourcesFrom("limits", req.Limits); err != nil {
		return f, fmt.Errorf("%w: function %q: %v", stack.ErrInvalid, f.Name, err)
	}
	if f.Requests, err = stack.ResourcesFrom("requests", req.Requests); err != nil {
		return f, fmt.Errorf("%w: function %q: %v", stack.ErrInvalid, f.Name, err)
	}
	return f, f.Validate()
}

// persistFailed answers a change the dispatcher made but the state folder
// could not keep: it is served now and lost at the next restart.
func (g *Gateway) persistFailed(w http.ResponseWriter, name string, err error) {
	g.cfg.Logger.Error("the change is served but not kept in the state folder", "function", name, "err", err)
	http.Error(w, fmt.Sprintf("function %q changed, but the state folder could not keep the change, so a restart loses it: %v", name, err),
		http.StatusInternalServerError)
}

func (g *Gateway) deleteFunction(w http.ResponseWriter, r *http.Request) {
	var req struct {
		FunctionName string `json:"functionName"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if req.FunctionName == "" {
		http.Error(w, "functionName is required", http.StatusBadRequest)
		return
	}
	name := trimNamespace(req.FunctionName)
	g.store.lock()
	defer g.store.unlock()
	if err := g.d.Remove(r.Context(), name); err != nil {
		writeError(w, err)
		return
	}
	g.logs.Drop(name)
	g.limits.forget(name)
	if err := g.store.remove(name); err != nil {
		g.persistFailed(w, name, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (g *Gateway) scaleFunction(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ServiceName string `json:"serviceName"`
		Replicas    *int64 `json:"replicas"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	name := trimNamespace(r.PathValue("name"))
	switch {
	case req.Replicas == nil:
		http.Error(w, "replicas is required", http.StatusBadRequest)
		return
	case req.ServiceName != "" && req.ServiceName != name:
		http.Error(w, fmt.Sprintf("serviceName %q does not match the path's %q", req.ServiceName, name), http.StatusBadRequest)
		return
	case *req.Replicas < 0 || *req.Replicas > stack.MaxInstances:
		http.Error(w, fmt.Sprintf("replicas %d must be in [0, %d]", *req.Replicas, stack.MaxInstances), http.StatusBadRequest)
		return
	}
	g.store.lock()
	defer g.store.unlock()
	if err := g.d.Scale(name, int(*req.Replicas)); err != nil {
		writeError(w, err)
		return
	}
	if err := g.store.saveReplicas(name, int(*req.Replicas)); err != nil {
		g.persistFailed(w, name, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
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
	a := stack.App{Name: req.Name, Functions: req.Functions}
	if req.SLO != "" {
		d, err := time.ParseDuration(req.SLO)
		if err != nil {
			http.Error(w, fmt.Sprintf("slo: %v", err), http.StatusBadRequest)
			return
		}
		a.SLO = d
	}
	if err := g.d.DeployApp(a); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (g *Gateway) deleteApp(w http.ResponseWriter, r *http.Request) {
	if err := g.d.RemoveApp(r.PathValue("name")); err != nil {
		writeError(w, err)
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

func (g *Gateway) namespaces(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, []string{namespace})
}

// readJSON decodes a bounded JSON body, answering 400 or 413 itself.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxAPIBody)
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			http.Error(w, fmt.Sprintf("request body larger than %d bytes", maxAPIBody), http.StatusRequestEntityTooLarge)
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
	case errors.Is(err, dispatch.ErrExists), errors.Is(err, dispatch.ErrRefused):
		code = http.StatusConflict
	case errors.Is(err, dispatch.ErrQueueFull):
		w.Header().Set("Retry-After", "1")
		code = http.StatusTooManyRequests
	case errors.Is(err, dispatch.ErrClosed), errors.Is(err, dispatch.ErrRemoved):
		code = http.StatusServiceUnavailable
	case errors.Is(err, dispatch.ErrStartFailed):
		code = http.StatusBadGateway
	}
	http.Error(w, err.Error(), code)
}
