package stack

import (
	"fmt"

	"gantry.dev/gantry/pkg/secrets"
)

// MaxSecrets bounds the secrets one function names.
const MaxSecrets = secrets.MaxPerFunction

// validateExtras checks the fields OpenFaaS adds beside Gantry's own:
// secrets.
func (f *Function) validateExtras() error {
	if len(f.Secrets) > MaxSecrets {
		return fmt.Errorf("%w: function %q: at most %d secrets", ErrInvalid, f.Name, MaxSecrets)
	}
	seen := map[string]bool{}
	for _, s := range f.Secrets {
		if err := secrets.CheckName(s); err != nil {
			return fmt.Errorf("%w: function %q: %v", ErrInvalid, f.Name, err)
		}
		if seen[s] {
			return fmt.Errorf("%w: function %q names secret %q twice", ErrInvalid, f.Name, s)
		}
		seen[s] = true
	}
	return nil
}
