package gateway

// /system/secrets as OpenFaaS's API has it, kept in the state folder by
// pkg/secrets, and the hand-over of a function's secrets to its local
// instances: each instance gets a private folder of copies whose path is
// in its environment.

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"gantry.dev/gantry/pkg/secrets"
	"gantry.dev/gantry/pkg/stack"
)

// SecretsDirEnv names the environment variable that holds the path of an
// instance's private folder of secrets: a function reads secret NAME at
// $GANTRY_SECRETS_DIR/NAME where OpenFaaS would mount /var/openfaas/secrets/NAME.
const SecretsDirEnv = "GANTRY_SECRETS_DIR"

// secretJSON is OpenFaaS's Secret (faas-provider types.Secret).
type secretJSON struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Value     string `json:"value,omitempty"`
	RawValue  []byte `json:"rawValue,omitempty"`
}

// noSecrets says why a gateway does not serve /system/secrets; empty when
// it does.
func (g *Gateway) noSecrets() string {
	switch {
	case g.secrets == nil:
		return "secrets need the gateway's state folder (gantry serve --state-dir) to be kept in; this gateway has none"
	case !g.local:
		return "secrets are kept for local instances only; on Kubernetes create Kubernetes Secrets (kubectl create secret) until this backend mounts them"
	}
	return ""
}

func (g *Gateway) secretsRoute(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if why := g.noSecrets(); why != "" {
			http.Error(w, why, http.StatusNotImplemented)
			return
		}
		if ns := r.URL.Query().Get("namespace"); ns != "" && ns != stack.DefaultNamespace {
			http.Error(w, fmt.Sprintf("secrets are kept for namespace %q only, not %q", stack.DefaultNamespace, ns), http.StatusBadRequest)
			return
		}
		h(w, r)
	}
}

func (g *Gateway) listSecrets(w http.ResponseWriter, _ *http.Request) {
	names, err := g.secrets.List()
	if err != nil {
		http.Error(w, fmt.Sprintf("listing secrets: %v", err), http.StatusInternalServerError)
		return
	}
	out := make([]secretJSON, 0, len(names))
	for _, n := range names {
		out = append(out, secretJSON{Name: n, Namespace: stack.DefaultNamespace})
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeSecret decodes a secret request; want says whether the value is
// required (create, update) or refused (delete).
func decodeSecret(w http.ResponseWriter, r *http.Request, wantValue bool) (secretJSON, []byte, bool) {
	var req secretJSON
	if !readJSON(w, r, &req) {
		return req, nil, false
	}
	if err := secrets.CheckName(req.Name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return req, nil, false
	}
	if req.Namespace != "" && req.Namespace != stack.DefaultNamespace {
		http.Error(w, fmt.Sprintf("secrets are kept for namespace %q only, not %q", stack.DefaultNamespace, req.Namespace), http.StatusBadRequest)
		return req, nil, false
	}
	value := []byte(req.Value)
	if len(req.RawValue) > 0 {
		if req.Value != "" {
			http.Error(w, "give value or rawValue, not both", http.StatusBadRequest)
			return req, nil, false
		}
		value = req.RawValue
	}
	switch {
	case wantValue && len(value) == 0:
		http.Error(w, fmt.Sprintf("secret %q: value (or base64 rawValue) is required and must not be empty", req.Name), http.StatusBadRequest)
		return req, nil, false
	case !wantValue && len(value) > 0:
		http.Error(w, "a delete takes only the secret's name", http.StatusBadRequest)
		return req, nil, false
	}
	return req, value, true
}

func (g *Gateway) createSecret(w http.ResponseWriter, r *http.Request) {
	if req, value, ok := decodeSecret(w, r, true); ok {
		secretResult(w, g.secrets.Create(req.Name, value))
	}
}

func (g *Gateway) updateSecret(w http.ResponseWriter, r *http.Request) {
	if req, value, ok := decodeSecret(w, r, true); ok {
		secretResult(w, g.secrets.Update(req.Name, value))
	}
}

func (g *Gateway) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if req, _, ok := decodeSecret(w, r, false); ok {
		secretResult(w, g.secrets.Delete(req.Name))
	}
}

func secretResult(w http.ResponseWriter, err error) {
	code := http.StatusAccepted
	switch {
	case err == nil:
		w.WriteHeader(code)
		return
	case errors.Is(err, secrets.ErrInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, secrets.ErrExists):
		code = http.StatusConflict
	case errors.Is(err, secrets.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, secrets.ErrFull):
		code = http.StatusInsufficientStorage
	default:
		code = http.StatusInternalServerError
	}
	http.Error(w, err.Error(), code)
}

// checkSecretsExist refuses a deployment naming a secret that is not
// there, as OpenFaaS does: secrets must exist at deployment time.
func (g *Gateway) checkSecretsExist(f stack.Function) error {
	if len(f.Secrets) == 0 || !g.local {
		return nil // another backend honours or refuses them itself
	}
	if why := g.noSecrets(); why != "" {
		return fmt.Errorf("%w: function %q names secrets, but %s", stack.ErrInvalid, f.Name, why)
	}
	if f.Namespace != "" && f.Namespace != stack.DefaultNamespace {
		return fmt.Errorf("%w: function %q: secrets are kept for namespace %q only; this function is in %q", stack.ErrInvalid, f.Name, stack.DefaultNamespace, f.Namespace)
	}
	var missing []string
	for _, s := range f.Secrets {
		if !g.secrets.Has(s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: function %q names secrets that do not exist: %s; create them first (faas-cli secret create NAME)",
			stack.ErrInvalid, f.Name, strings.Join(missing, ", "))
	}
	return nil
}

// secretsFor gives one instance its private copies of its function's
// secrets: the environment variable to add and the cleanup to run when it
// exits.
func (g *Gateway) secretsFor(id string, f stack.Function) (env []string, cleanup func(), err error) {
	if len(f.Secrets) == 0 || g.secrets == nil {
		return nil, nil, nil
	}
	dir, cleanup, err := g.secrets.Materialize(id, f.Secrets)
	if err != nil {
		return nil, nil, fmt.Errorf("secrets of %q: %w", f.Name, err)
	}
	return []string{SecretsDirEnv + "=" + dir}, cleanup, nil
}
