package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gantry.dev/gantry/pkg/statedir"
)

// backendRecord names, in a state folder, the backend its functions were
// deployed on.
const backendRecord = "backend"

// claimStateBackend keeps one state folder's functions on one backend.
// The default folder is named after the listen address alone, so a
// `gantry serve --backend kubernetes` on 127.0.0.1:8080 found the
// functions that faas-cli had deployed to a local gateway on the same
// address and deployed them to the cluster, unasked. A folder whose
// functions another backend's gateway deployed is refused, naming them;
// an empty one changes hands.
func claimStateBackend(dir, backend string) error {
	path := filepath.Join(dir, backendRecord)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if prev := strings.TrimSpace(string(data)); prev != backend {
			fns, err := storedFunctions(dir)
			if err != nil {
				return err
			}
			if len(fns) > 0 {
				return fmt.Errorf("state folder %s holds functions a gateway with --backend %s deployed (%s); "+
					"this one runs instances on %s: pass --state-dir with a folder of its own, or remove them "+
					"(faas-cli remove) from a --backend %s gateway on this folder", dir, prev, strings.Join(fns, ", "), backend, prev)
			}
		}
	}
	return os.WriteFile(path, []byte(backend+"\n"), 0o644)
}

// storedFunctions names the functions a state folder holds.
func storedFunctions(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, statedir.Functions))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
