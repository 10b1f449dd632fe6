package stack

// OpenFaaS's fields that Gantry's policy does not read but that a user
// declares and faas-cli shows back: the namespace, secrets, constraints,
// resources and the read-only root filesystem. They travel whole from a
// stack file or a deployment request to the backend, which honours them or
// refuses the function (backend.Refuse); nothing is dropped on the way.

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultNamespace is the namespace a function lands in when none is
// given, named as OpenFaaS names its function namespace. NAME and
// NAME.openfaas-fn name the same function (../shared/conventions.md).
const DefaultNamespace = "openfaas-fn"

// Bounds on the OpenFaaS fields, checked before anything is kept.
const (
	MaxSecrets       = 64
	MaxConstraints   = 32
	MaxConstraintLen = 256
)

// Resources are a function's limits or requests, as OpenFaaS's
// FunctionResources carries them: Kubernetes quantities ("128Mi", "100m").
type Resources struct {
	Memory string `json:"memory,omitempty" yaml:"memory"`
	CPU    string `json:"cpu,omitempty" yaml:"cpu"`
}

// IsZero reports whether nothing is set.
func (r Resources) IsZero() bool { return r == Resources{} }

// MemoryBytes is the memory quantity in bytes; 0 when unset.
func (r Resources) MemoryBytes() int64 {
	if r.Memory == "" {
		return 0
	}
	q, err := resource.ParseQuantity(r.Memory)
	if err != nil {
		return 0 // Validate refused it already
	}
	return q.Value()
}

func (r Resources) validate(field string) error {
	for _, v := range []struct{ key, val string }{{"memory", r.Memory}, {"cpu", r.CPU}} {
		if v.val == "" {
			continue
		}
		q, err := resource.ParseQuantity(v.val)
		if err != nil {
			return fmt.Errorf("%s.%s %q is not a quantity (for example 128Mi or 100m): %v", field, v.key, v.val, err)
		}
		if q.Sign() <= 0 {
			return fmt.Errorf("%s.%s %q must be positive", field, v.key, v.val)
		}
	}
	return nil
}

// Ref is the key a function is registered under: its name in the default
// namespace, NAME.NAMESPACE in any other. Names are DNS labels, so the
// first dot separates the two.
func Ref(name, namespace string) string {
	if namespace == "" || namespace == DefaultNamespace {
		return name
	}
	return name + "." + namespace
}

// SplitRef is Ref's inverse: "fn" and "fn.openfaas-fn" are both
// ("fn", "openfaas-fn").
func SplitRef(ref string) (name, namespace string) {
	name, namespace, _ = strings.Cut(ref, ".")
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return name, namespace
}

// CanonicalRef turns what a client names a function by (NAME or
// NAME.NAMESPACE) into its registry key.
func CanonicalRef(s string) string { return Ref(SplitRef(s)) }

// Ref is the function's registry key.
func (f *Function) Ref() string { return Ref(f.Name, f.Namespace) }

// Qualified is NAME.NAMESPACE, the namespace always written out: the
// function_name label OpenFaaS's metrics carry.
func (f *Function) Qualified() string { return Qualified(f.Name, f.Namespace) }

// Qualified is NAME.NAMESPACE, with the default namespace for "".
func Qualified(name, namespace string) string {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return name + "." + namespace
}

// QualifiedRef is the metrics label of a registry key.
func QualifiedRef(ref string) string { return Qualified(SplitRef(ref)) }

// NamespaceOrDefault is the function's namespace, DefaultNamespace for a
// declaration whose defaults were not applied.
func (f *Function) NamespaceOrDefault() string {
	if f.Namespace == "" {
		return DefaultNamespace
	}
	return f.Namespace
}

// validateOpenFaaS checks the OpenFaaS fields.
func (f *Function) validateOpenFaaS() error {
	if err := CheckName(f.NamespaceOrDefault()); err != nil {
		return fmt.Errorf("namespace: %v", err)
	}
	if len(f.Secrets) > MaxSecrets {
		return fmt.Errorf("at most %d secrets", MaxSecrets)
	}
	for _, s := range f.Secrets {
		if err := CheckName(s); err != nil {
			return fmt.Errorf("secret: %v", err)
		}
	}
	if len(f.Constraints) > MaxConstraints {
		return fmt.Errorf("at most %d constraints", MaxConstraints)
	}
	for _, c := range f.Constraints {
		if c == "" || len(c) > MaxConstraintLen {
			return fmt.Errorf("constraint %q must be 1 to %d characters", c, MaxConstraintLen)
		}
	}
	if err := f.Limits.validate("limits"); err != nil {
		return err
	}
	return f.Requests.validate("requests")
}
