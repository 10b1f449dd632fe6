package gateway

// Functions survive a restart: every deploy, update, scale and removal that
// arrives over the API is written to the state folder's functions/ (one file
// per function, replaced atomically), and Start deploys them again before
// the stack file, as OpenFaaS keeps functions across gateway restarts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

// storedVersion is the format of a function's file; a file of another
// version is left alone and logged, never half-read.
const storedVersion = 1

// maxStoredFile bounds a function's file as read back: the API bounds the
// request it came from to maxAPIBody.
const maxStoredFile = 2 * maxAPIBody

// storedFunction is one function's file: the last deployment request the
// API accepted for it, and the replicas of the last scale-function call.
type storedFunction struct {
	Version    int        `json:"version"`
	Deployment deployment `json:"deployment"`
	Replicas   *int       `json:"replicas,omitempty"`
	// CreatedAt is when the API first deployed the function: createdAt
	// stays what it was across restarts.
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// functionStore writes the API's changes to functions/. Its lock is held
// across a change and its write, so the file always follows the last
// change that the dispatcher accepted. A nil store keeps nothing.
type functionStore struct {
	mu  sync.Mutex
	dir string
}

func newFunctionStore(d *statedir.Dir) *functionStore {
	if d == nil {
		return nil
	}
	return &functionStore{dir: d.Sub(statedir.Functions)}
}

func (s *functionStore) lock() {
	if s != nil {
		s.mu.Lock()
	}
}

func (s *functionStore) unlock() {
	if s != nil {
		s.mu.Unlock()
	}
}

// path is the file of a function, by its registry key (NAME, or
// NAME.NAMESPACE outside the default namespace); names and namespaces are
// DNS-1123 labels (checked before anything is stored), so keys are safe
// file names.
func (s *functionStore) path(ref string) string { return filepath.Join(s.dir, ref+".json") }

// saveDeployment records a deploy or update. An update keeps the replicas
// of an earlier scale, as OpenFaaS's update keeps the replica count.
func (s *functionStore) saveDeployment(ref string, req deployment, created time.Time) error {
	if s == nil {
		return nil
	}
	rec := storedFunction{Version: storedVersion, Deployment: req, CreatedAt: created.UTC()}
	if old, err := s.read(ref); err == nil {
		rec.Replicas = old.Replicas
		if !old.CreatedAt.IsZero() {
			rec.CreatedAt = old.CreatedAt
		}
	}
	return s.write(ref, rec)
}

// saveReplicas records a scale of a function the API deployed; a function
// that only the stack file declares has no file, and its scale is not kept.
func (s *functionStore) saveReplicas(name string, n int) error {
	if s == nil {
		return nil
	}
	rec, err := s.read(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	rec.Replicas = &n
	return s.write(name, rec)
}

func (s *functionStore) remove(name string) error {
	if s == nil {
		return nil
	}
	return removeStored(s.path(name))
}

// removeStored removes a stored record; one already gone is removed.
func removeStored(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (s *functionStore) write(ref string, rec storedFunction) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return statedir.WriteFile(s.path(ref), append(b, '\n'), 0o600)
}

func (s *functionStore) read(name string) (storedFunction, error) {
	return readStored(s.path(name))
}

func readStored(path string) (storedFunction, error) {
	var rec storedFunction
	f, err := os.Open(path)
	if err != nil {
		return rec, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxStoredFile {
		return rec, fmt.Errorf("%s: larger than %d bytes", path, maxStoredFile)
	}
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, fmt.Errorf("%s: %w", path, err)
	}
	if rec.Version != storedVersion {
		return rec, fmt.Errorf("%s: format version %d, this gateway reads %d", path, rec.Version, storedVersion)
	}
	if want, got := strings.TrimSuffix(filepath.Base(path), ".json"), stack.Ref(rec.Deployment.Service, rec.Deployment.Namespace); got != want {
		return rec, fmt.Errorf("%s: holds function %q", path, got)
	}
	return rec, nil
}

// all reads every stored function, by name. A file that cannot be read is
// logged and skipped, so one bad file does not keep the rest from serving.
func (s *functionStore) all(log *slog.Logger) []storedFunction {
	if s == nil {
		return nil
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		log.Error("reading the stored functions", "dir", s.dir, "err", err)
		return nil
	}
	var out []storedFunction
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue // temporary files of an interrupted write among them
		}
		if len(out) >= stack.MaxFunctions {
			log.Error("more stored functions than a gateway serves; the rest are not loaded", "max", stack.MaxFunctions)
			break
		}
		rec, err := readStored(filepath.Join(s.dir, e.Name()))
		if err != nil {
			log.Error("skipping a stored function", "err", err)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// restore deploys the stored functions, then the stack file. A stored
// function that the stack file also declares is not loaded: the stack file
// wins for the functions it names (../shared/conventions.md), and the file
// stays, so a later start without that stack serves it again.
func (g *Gateway) restore(ctx context.Context, s *stack.Stack) error {
	named := map[string]bool{}
	if s != nil {
		for _, f := range s.Functions {
			named[f.Ref()] = true
		}
	}
	g.restoreNamespaces()
	for _, rec := range g.store.all(g.cfg.Logger) {
		name := stack.Ref(rec.Deployment.Service, rec.Deployment.Namespace)
		if named[name] {
			g.cfg.Logger.Info("the stack file declares a stored function; the stack's declaration is served", "function", name)
			continue
		}
		if err := g.restoreOne(ctx, rec); err != nil {
			g.cfg.Logger.Error("a stored function could not be deployed again; its file stays", "function", name, "err", err)
			continue
		}
		g.cfg.Logger.Info("function restored from the state folder", "function", name)
	}
	if s != nil {
		for _, f := range s.Functions {
			if err := g.checkSecretsExist(ctx, f); err != nil {
				return err
			}
		}
		if err := g.d.Load(ctx, s); err != nil {
			return err
		}
	}
	g.restoreApps(s)
	return nil
}

func (g *Gateway) restoreOne(ctx context.Context, rec storedFunction) error {
	f, err := rec.Deployment.function()
	if err != nil {
		return err
	}
	// Load deploys the way a stack file does, which a follower of
	// scaled-out replicas accepts too.
	if err := g.d.Load(ctx, &stack.Stack{Functions: []stack.Function{f}}); err != nil {
		return err
	}
	if !rec.CreatedAt.IsZero() {
		if err := g.d.SetCreatedAt(f.Ref(), rec.CreatedAt); err != nil {
			return err
		}
	}
	if rec.Replicas == nil {
		return nil
	}
	// An update after the scale may have moved the bounds past it (it
	// keeps the count, as OpenFaaS's does): the nearest count within them.
	n := min(max(*rec.Replicas, f.MinScale), f.MaxScale)
	if n != *rec.Replicas {
		g.cfg.Logger.Info("the stored replica count is outside the function's scale bounds; restored to the nearest within them",
			"function", f.Ref(), "stored", *rec.Replicas, "replicas", n, "min", f.MinScale, "max", f.MaxScale)
	}
	if err := g.d.Scale(f.Ref(), n); err != nil && !errors.Is(err, dispatch.ErrRefused) {
		return fmt.Errorf("replicas %d: %w", n, err)
	}
	return nil
}
