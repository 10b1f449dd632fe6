// Package statedir is the gateway's state folder (../shared/conventions.md):
// one folder per gateway, locked so that two gateways never share it, holding
// what must survive a restart or a crash: deployed functions, the namespaces
// and apps created over the API, secrets, the records of running instances,
// the embedded queue's store and logs.
package statedir

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The folders of the layout. Secrets is private to the gateway's user.
const (
	Functions = "functions"
	Secrets   = "secrets"
	Instances = "instances"
	JetStream = "jetstream"
	Logs      = "logs"
	// Namespaces and Apps hold what /system/namespace and /system/apps
	// created, one file each, as Functions does for functions.
	Namespaces = "namespaces"
	Apps       = "apps"
)

const lockName = "lock"

// ErrHeld is returned by Open when another live process holds the folder.
var ErrHeld = errors.New("state folder is in use")

// Dir is an open, locked state folder. Close releases the lock.
type Dir struct {
	path string
	lock *os.File
}

// Default is the folder a gateway listening on addr uses when none is given:
// $XDG_STATE_HOME/gantry/<host>_<port>, else $HOME/.local/state/gantry/<host>_<port>,
// so the same command line finds the same state after a restart.
func Default(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("state folder for %q: %w", addr, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("state folder: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	name := strings.NewReplacer(":", "_", "/", "_", "%", "_").Replace(host) + "_" + port
	return filepath.Join(base, "gantry", name), nil
}

// Open creates the folder and its layout if needed and locks it. When another
// process holds it, the error wraps ErrHeld and names that process's PID.
func Open(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("state folder: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(abs, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by PID %s", ErrHeld, abs, holder(abs))
		}
		return nil, fmt.Errorf("state folder %s: lock: %w", abs, err)
	}
	d := &Dir{path: abs, lock: f}
	if err := d.writePID(); err != nil {
		d.Close()
		return nil, err
	}
	for _, sub := range []string{Functions, Instances, JetStream, Logs, Namespaces, Apps} {
		if err := os.MkdirAll(filepath.Join(abs, sub), 0o755); err != nil {
			d.Close()
			return nil, fmt.Errorf("state folder: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(abs, Secrets), 0o700); err != nil {
		d.Close()
		return nil, fmt.Errorf("state folder: %w", err)
	}
	// MkdirAll leaves an existing folder's mode alone: tighten it.
	if err := os.Chmod(filepath.Join(abs, Secrets), 0o700); err != nil {
		d.Close()
		return nil, fmt.Errorf("state folder: %w", err)
	}
	return d, nil
}

// Temp opens a fresh state folder under the system's temporary folder, for a
// gateway whose state must not outlive it (gantry up). Remove deletes it.
func Temp() (*Dir, error) {
	p, err := os.MkdirTemp("", "gantry-state-")
	if err != nil {
		return nil, err
	}
	d, err := Open(p)
	if err != nil {
		os.RemoveAll(p)
	}
	return d, err
}

func (d *Dir) writePID() error {
	if err := d.lock.Truncate(0); err != nil {
		return err
	}
	_, err := d.lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// holder reads the PID the lock's holder wrote; "unknown" if it cannot.
func holder(path string) string {
	b, err := os.ReadFile(filepath.Join(path, lockName))
	if err != nil {
		return "unknown"
	}
	pid := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		return "unknown"
	}
	return pid
}

// Path is the folder's absolute path.
func (d *Dir) Path() string { return d.path }

// Sub is the path of one of the layout's folders (Functions, Secrets, ...).
func (d *Dir) Sub(name string) string { return filepath.Join(d.path, name) }

// Close releases the lock; the folder and its contents stay.
func (d *Dir) Close() error {
	if d == nil || d.lock == nil {
		return nil
	}
	err := d.lock.Close()
	d.lock = nil
	return err
}

// Remove releases the lock and deletes the folder (for Temp folders).
func (d *Dir) Remove() error {
	return errors.Join(d.Close(), os.RemoveAll(d.path))
}

// WriteFile replaces path's contents atomically: a reader, or a gateway that
// restarts after a crash, sees the old file or the new one, never a part. The
// data reach the disk before the rename.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
