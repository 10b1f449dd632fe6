package dispatch

import (
	"fmt"
	"time"
)

// SetCreatedAt sets when a function was first deployed, for a gateway that
// deploys again what an earlier run of it kept: OpenFaaS's createdAt stays
// what it was across restarts.
func (d *Dispatcher) SetCreatedAt(ref string, t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn, ok := d.fns[ref]
	if !ok {
		return fmt.Errorf("%w: function %q", ErrNotFound, ref)
	}
	fn.created = t
	return nil
}
