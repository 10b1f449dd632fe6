package gateway

// /system/secrets as OpenFaaS's API has it, kept in the state folder by
// pkg/secrets, and the hand-over of a function's secrets to its local
// instances: each instance gets a private folder of copies whose path is
// in its environment.

import (
	"context"
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

// secretKeeper keeps secrets by function namespace: the state folder
// (localSecrets) or the backend's cluster (the Kubernetes backend's
// Kubernetes Secrets).
type secretKeeper interface {
	ListSecrets(ctx context.Context, namespace string) ([]string, error)
	SecretExists(ctx context.Context, namespace, name string) (bool, error)
	CreateSecret(ctx context.Context, namespace, name string, value []byte) error
	UpdateSecret(ctx context.Context, namespace, name string, value []byte) error
	DeleteSecret(ctx context.Context, namespace, name string) error
}

// localSecrets is the state folder's store, which keeps the default
// namespace's secrets only.
type localSecrets struct{ s *secrets.Store }

func (l localSecrets) ns(namespace string) error {
	if namespace != "" && namespace != stack.DefaultNamespace {
		return fmt.Errorf("%w: secrets are kept for namespace %q only, not %q", secrets.ErrInvalid, stack.DefaultNamespace, namespace)
	}
	return nil
}

func (l localSecrets) ListSecrets(_ context.Context, namespace string) ([]string, error) {
	if err := l.ns(namespace); err != nil {
		return nil, err
	}
	return l.s.List()
}

func (l localSecrets) SecretExists(_ context.Context, namespace, name string) (bool, error) {
	if err := l.ns(namespace); err != nil {
		return false, err
	}
	return l.s.Has(name), nil
}

func (l localSecrets) CreateSecret(_ context.Context, namespace, name string, value []byte) error {
	if err := l.ns(namespace); err != nil {
		return err
	}
	return l.s.Create(name, value)
}

func (l localSecrets) UpdateSecret(_ context.Context, namespace, name string, value []byte) error {
	if err := l.ns(namespace); err != nil {
		return err
	}
	return l.s.Update(name, value)
}

func (l localSecrets) DeleteSecret(_ context.Context, namespace, name string) error {
	if err := l.ns(namespace); err != nil {
		return err
	}
	return l.s.Delete(name)
}

// keeper is where this gateway keeps secrets, or nil with the reason it
// keeps none.
func (g *Gateway) keeper() (secretKeeper, string) {
	switch {
	case g.cluster != nil:
		return g.cluster, ""
	case !g.local:
		return nil, "this backend keeps no secrets"
	case g.secrets == nil:
		return nil, "secrets need the gateway's state folder (gantry serve --state-dir) to be kept in; this gateway has none"
	}
	return localSecrets{g.secrets}, ""
}

func (g *Gateway) secretsRoute(h func(http.ResponseWriter, *http.Request, secretKeeper)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, why := g.keeper()
		if k == nil {
			http.Error(w, why, http.StatusNotImplemented)
			return
		}
		h(w, r, k)
	}
}

func (g *Gateway) listSecrets(w http.ResponseWriter, r *http.Request, k secretKeeper) {
	ns := namespaceOrDefault(r.URL.Query().Get("namespace"))
	names, err := k.ListSecrets(r.Context(), ns)
	if err != nil {
		secretResult(w, fmt.Errorf("listing secrets: %w", err))
		return
	}
	out := make([]secretJSON, 0, len(names))
	for _, n := range names {
		out = append(out, secretJSON{Name: n, Namespace: ns})
	}
	writeJSON(w, http.StatusOK, out)
}

func namespaceOrDefault(ns string) string {
	if ns == "" {
		return stack.DefaultNamespace
	}
	return ns
}

// maxSecretBody bounds a secret request's JSON: room for a value of
// secrets.MaxValue as base64 rawValue (4/3 of it) or as a JSON string
// with some escaping; the value itself is checked against MaxValue.
const maxSecretBody = 2*secrets.MaxValue + 64<<10

// decodeSecret decodes a secret request; want says whether the value is
// required (create, update) or refused (delete).
func decodeSecret(w http.ResponseWriter, r *http.Request, wantValue bool) (secretJSON, []byte, bool) {
	var req secretJSON
	if !decodeJSON(w, r, &req, maxSecretBody) {
		return req, nil, false
	}
	if err := secrets.CheckName(req.Name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return req, nil, false
	}
	if q := r.URL.Query().Get("namespace"); q != "" && req.Namespace != "" && q != req.Namespace {
		http.Error(w, fmt.Sprintf("the body names namespace %q, the query %q", req.Namespace, q), http.StatusBadRequest)
		return req, nil, false
	}
	req.Namespace = namespaceOrDefault(firstNonEmpty(req.Namespace, r.URL.Query().Get("namespace")))
	if err := stack.CheckName(req.Namespace); err != nil {
		http.Error(w, "namespace: "+err.Error(), http.StatusBadRequest)
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

func (g *Gateway) createSecret(w http.ResponseWriter, r *http.Request, k secretKeeper) {
	if req, value, ok := decodeSecret(w, r, true); ok {
		secretResult(w, k.CreateSecret(r.Context(), req.Namespace, req.Name, value))
	}
}

func (g *Gateway) updateSecret(w http.ResponseWriter, r *http.Request, k secretKeeper) {
	if req, value, ok := decodeSecret(w, r, true); ok {
		secretResult(w, k.UpdateSecret(r.Context(), req.Namespace, req.Name, value))
	}
}

func (g *Gateway) deleteSecret(w http.ResponseWriter, r *http.Request, k secretKeeper) {
	if req, _, ok := decodeSecret(w, r, false); ok {
		secretResult(w, k.DeleteSecret(r.Context(), req.Namespace, req.Name))
	}
}

func secretResult(w http.ResponseWriter, err error) {
	code := http.StatusAccepted
	switch {
	case err == nil:
		w.WriteHeader(code)
		return
	case errors.Is(err, secrets.ErrInvalid), errors.Is(err, stack.ErrInvalid):
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
func (g *Gateway) checkSecretsExist(ctx context.Context, f stack.Function) error {
	if len(f.Secrets) == 0 {
		return nil
	}
	k, why := g.keeper()
	if k == nil {
		if !g.local {
			return nil // another backend honours or refuses them itself
		}
		return fmt.Errorf("%w: function %q names secrets, but %s", stack.ErrInvalid, f.Name, why)
	}
	var missing []string
	for _, s := range f.Secrets {
		ok, err := k.SecretExists(ctx, f.NamespaceOrDefault(), s)
		if err != nil {
			return fmt.Errorf("function %q: %w", f.Name, err)
		}
		if !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: function %q names secrets that do not exist in namespace %q: %s; create them first (faas-cli secret create NAME)",
			stack.ErrInvalid, f.Name, f.NamespaceOrDefault(), strings.Join(missing, ", "))
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
