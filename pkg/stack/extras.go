package stack

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"gantry.dev/gantry/pkg/secrets"
)

// MaxSecrets bounds the secrets one function names.
const MaxSecrets = secrets.MaxPerFunction

// Resources are a function's limits or requests, as OpenFaaS's API and
// stack files give them: Kubernetes quantities ("128Mi", "500m"), kept as
// written so that they are returned unchanged.
type Resources struct {
	Memory string
	CPU    string
}

// Bounds of a quantity.
const (
	MaxMemory = 1 << 40 // 1 TiB
	MaxCPU    = 1024    // cores
)

// IsZero reports whether neither is set.
func (r Resources) IsZero() bool { return r.Memory == "" && r.CPU == "" }

// MemoryBytes is the memory quantity in bytes (0 if unset).
func (r Resources) MemoryBytes() int64 {
	if r.Memory == "" {
		return 0
	}
	q, err := resource.ParseQuantity(r.Memory)
	if err != nil {
		return 0
	}
	return q.Value()
}

// ResourcesFrom reads OpenFaaS's map ("memory", "cpu"); any other key
// (GPUs) is refused, since nothing here would honour it.
func ResourcesFrom(field string, m map[string]string) (Resources, error) {
	var r Resources
	var unknown []string
	for k, v := range m {
		switch k {
		case "memory":
			r.Memory = v
		case "cpu":
			r.CPU = v
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return r, fmt.Errorf("%s: %s not supported; only memory and cpu", field, strings.Join(unknown, ", "))
	}
	return r, nil
}

func (r Resources) validate(field string) error {
	for _, q := range []struct {
		name, v string
		max     int64
	}{{"memory", r.Memory, MaxMemory}, {"cpu", r.CPU, MaxCPU}} {
		if q.v == "" {
			continue
		}
		qty, err := resource.ParseQuantity(q.v)
		if err != nil {
			return fmt.Errorf("%s.%s %q is not a quantity (e.g. 128Mi, 500m): %v", field, q.name, q.v, err)
		}
		if qty.Sign() <= 0 || qty.Cmp(*resource.NewQuantity(q.max, resource.BinarySI)) > 0 {
			return fmt.Errorf("%s.%s %q must be above 0 and at most %d", field, q.name, q.v, q.max)
		}
	}
	return nil
}

// validateExtras checks the fields OpenFaaS adds beside Gantry's own:
// secrets, limits and requests.
func (f *Function) validateExtras() error {
	for _, r := range []struct {
		field string
		res   Resources
	}{{"limits", f.Limits}, {"requests", f.Requests}} {
		if err := r.res.validate(r.field); err != nil {
			return fmt.Errorf("%w: function %q: %v", ErrInvalid, f.Name, err)
		}
	}
	if l, r := f.Limits.MemoryBytes(), f.Requests.MemoryBytes(); l > 0 && r > l {
		return fmt.Errorf("%w: function %q: requests.memory %s is above limits.memory %s", ErrInvalid, f.Name, f.Requests.Memory, f.Limits.Memory)
	}
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
