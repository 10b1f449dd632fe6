package gateway

// Namespaces and apps created over the API survive a restart too: each is
// one file in the state folder's namespaces/ or apps/, written atomically
// when the API changes it and removed when the API deletes it, and Start
// creates them again (restore, persist.go): namespaces before the stored
// functions that may live in them, apps after every function they chain.

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/statedir"
)

// recordDir keeps one JSON file per named record in a folder of the state
// folder. A nil recordDir keeps nothing. Names are DNS-1123 labels or
// function references, checked before anything is stored, so they are safe
// file names.
type recordDir struct {
	dir string
	// max bounds how many records are read back.
	max int
}

func newRecordDir(d *statedir.Dir, sub string, max int) *recordDir {
	if d == nil {
		return nil
	}
	return &recordDir{dir: d.Sub(sub), max: max}
}

func (s *recordDir) path(name string) string { return filepath.Join(s.dir, name+".json") }

// save writes v as name's record, {"version":1,"record":v}.
func (s *recordDir) save(name string, v any) error {
	if s == nil {
		return nil
	}
	b, err := json.MarshalIndent(struct {
		Version int `json:"version"`
		Record  any `json:"record"`
	}{storedVersion, v}, "", "  ")
	if err != nil {
		return err
	}
	return statedir.WriteFile(s.path(name), append(b, '\n'), 0o600)
}

func (s *recordDir) remove(name string) error {
	if s == nil {
		return nil
	}
	return removeStored(s.path(name))
}

// each decodes every record into a fresh T and hands it to fn with its
// file's name. A file that cannot be read is logged and skipped, so one bad
// file does not keep the rest from serving.
func eachRecord[T any](s *recordDir, log *slog.Logger, fn func(name string, v T)) {
	if s == nil {
		return
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		log.Error("reading the state folder", "dir", s.dir, "err", err)
		return
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue // temporary files of an interrupted write among them
		}
		if n >= s.max {
			log.Error("more stored records than a gateway takes; the rest are not loaded", "dir", s.dir, "max", s.max)
			return
		}
		n++
		name := strings.TrimSuffix(e.Name(), ".json")
		var rec struct {
			Version int `json:"version"`
			Record  T   `json:"record"`
		}
		if err := readRecord(filepath.Join(s.dir, e.Name()), &rec, &rec.Version); err != nil {
			log.Error("skipping a stored record", "err", err)
			continue
		}
		fn(name, rec.Record)
	}
}

func readRecord(path string, v any, version *int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxStoredFile {
		return fmt.Errorf("%s: larger than %d bytes", path, maxStoredFile)
	}
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if *version != storedVersion {
		return fmt.Errorf("%s: format version %d, this gateway reads %d", path, *version, storedVersion)
	}
	return nil
}

// restoreNamespaces creates again the namespaces the API created.
func (g *Gateway) restoreNamespaces() {
	eachRecord(g.nsStore, g.cfg.Logger, func(name string, ns functionNamespace) {
		if ns.Name != name || stack.CheckName(name) != nil || name == stack.DefaultNamespace {
			g.cfg.Logger.Error("skipping a stored namespace", "file", g.nsStore.path(name), "holds", ns.Name)
			return
		}
		g.ns.mu.Lock()
		g.ns.created[name] = ns
		g.ns.mu.Unlock()
	})
}

// restoreApps deploys again the apps the API deployed; an app the stack
// file declares is the stack's.
func (g *Gateway) restoreApps(s *stack.Stack) {
	declared := map[string]bool{}
	if s != nil {
		for _, a := range s.Apps {
			declared[a.Name] = true
		}
	}
	eachRecord(g.appStore, g.cfg.Logger, func(name string, a appJSON) {
		if a.Name != name {
			g.cfg.Logger.Error("skipping a stored app", "file", g.appStore.path(name), "holds", a.Name)
			return
		}
		if declared[name] {
			g.cfg.Logger.Info("the stack file declares a stored app; the stack's declaration is served", "app", name)
			return
		}
		app, err := a.app()
		if err == nil {
			err = g.d.DeployApp(app)
		}
		if err != nil {
			g.cfg.Logger.Error("a stored app could not be deployed again; its file stays", "app", name, "err", err)
		}
	})
}
