// Package secrets keeps the gateway's secrets, as OpenFaaS's secrets API
// manages them, in the state folder's secrets/ (../shared/conventions.md):
// one file per secret, 0600 in a 0700 folder, replaced atomically. An
// instance of a function that names secrets gets copies of them in a
// private folder of its own (Materialize), since a local process has no
// /var/openfaas/secrets mount.
package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"gantry.dev/gantry/pkg/statedir"
)

// Bounds, checked before anything is read or written: Kubernetes bounds a
// Secret to 1 MiB too.
const (
	MaxValue   = 1 << 20
	MaxSecrets = 1000
	// MaxPerFunction bounds the secrets one function names.
	MaxPerFunction = 64
)

// RunDir is the folder under secrets/ that holds the instances' private
// copies; names cannot start with '.', so no secret is called so.
const RunDir = ".run"

var (
	ErrInvalid  = errors.New("invalid secret")
	ErrExists   = errors.New("secret already exists")
	ErrNotFound = errors.New("secret not found")
	ErrFull     = errors.New("too many secrets")
)

// A name is a DNS-1123 subdomain, as Kubernetes names its Secrets; that
// makes it a safe file name too.
var namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// CheckName refuses a name that cannot name a secret.
func CheckName(name string) error {
	if !namePattern.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("%w: name %q must be lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253", ErrInvalid, name)
	}
	return nil
}

// Store is the secrets/ folder. Its lock orders writes, so that the count
// bound holds.
type Store struct {
	mu  sync.Mutex
	dir string
	// copies are the private folders of the instances running now, with
	// the secrets each holds: an update reaches them, as Kubernetes
	// updates a running pod's secret volume.
	copies map[string][]string
}

// Open returns the store of a state folder, and removes the private copies
// a gateway that crashed left behind.
func Open(d *statedir.Dir) (*Store, error) {
	s := &Store{dir: d.Sub(statedir.Secrets), copies: map[string][]string{}}
	if err := os.RemoveAll(filepath.Join(s.dir, RunDir)); err != nil {
		return nil, fmt.Errorf("secrets: removing the instances' old copies: %w", err)
	}
	return s, nil
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name) }

// List names the secrets, sorted; it never reads their values.
func (s *Store) List() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && CheckName(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Has reports whether a secret exists.
func (s *Store) Has(name string) bool {
	if CheckName(name) != nil {
		return false
	}
	st, err := os.Lstat(s.path(name))
	return err == nil && st.Mode().IsRegular()
}

// Get reads a secret's value.
func (s *Store) Get(name string) ([]byte, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return b, err
}

// Create adds a secret; ErrExists if it is there already.
func (s *Store) Create(name string, value []byte) error { return s.put(name, value, false) }

// Update replaces a secret's value; ErrNotFound if it is not there.
func (s *Store) Update(name string, value []byte) error { return s.put(name, value, true) }

func (s *Store) put(name string, value []byte, update bool) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if len(value) > MaxValue {
		return fmt.Errorf("%w: %q: value of %d bytes, at most %d", ErrInvalid, name, len(value), MaxValue)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exists := s.Has(name)
	switch {
	case update && !exists:
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	case !update && exists:
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	if !exists {
		names, err := s.List()
		if err != nil {
			return err
		}
		if len(names) >= MaxSecrets {
			return fmt.Errorf("%w: this gateway keeps at most %d", ErrFull, MaxSecrets)
		}
	}
	if err := statedir.WriteFile(s.path(name), value, 0o600); err != nil {
		return err
	}
	if !update {
		return nil
	}
	// The running instances holding it see the new value, each file
	// replaced whole (an instance reads the old value or the new one).
	var errs []error
	for dir, names := range s.copies {
		if slices.Contains(names, name) {
			if err := statedir.WriteFile(filepath.Join(dir, name), value, 0o400); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%q is updated, but not in the copies of every running instance: %w", name, err)
	}
	return nil
}

// Delete removes a secret; instances running keep their copies until they
// stop (as a pod keeps a deleted Secret's last content).
func (s *Store) Delete(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := os.Remove(s.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return err
}

// Materialize copies the named secrets into a fresh folder private to one
// instance (0700, files 0400) under secrets/.run/, and returns its path and
// a cleanup that removes it. The folder lives in the gateway's private
// secrets/, so a copy left by a crash is never readable by others, and
// Open removes it at the next start.
func (s *Store) Materialize(instance string, names []string) (dir string, cleanup func(), err error) {
	if len(names) > MaxPerFunction {
		return "", nil, fmt.Errorf("%w: at most %d secrets a function", ErrInvalid, MaxPerFunction)
	}
	run := filepath.Join(s.dir, RunDir)
	if err := os.MkdirAll(run, 0o700); err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp(run, sanitize(instance)+"-")
	if err != nil {
		return "", nil, err
	}
	remove := func() { os.RemoveAll(dir) }
	// Under the lock, so an update comes before the copy (which reads
	// its value) or after it is registered (and is written into it).
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		v, err := s.Get(name)
		if err != nil {
			remove()
			return "", nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), v, 0o400); err != nil {
			remove()
			return "", nil, err
		}
	}
	s.copies[dir] = slices.Clone(names)
	cleanup = func() {
		s.mu.Lock()
		delete(s.copies, dir)
		s.mu.Unlock()
		remove()
	}
	return dir, cleanup, nil
}

// sanitize keeps an instance ID usable as a folder name's prefix.
func sanitize(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
