package rtcontroller

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// ErrBadCriticality marks a criticality annotation that is not an integer in
// 0..99.
var ErrBadCriticality = errors.New("invalid criticality annotation")

// Criticality resolves the criticality in effect for rt: spec.criticality,
// else the Knative annotation on the object, else on its template, else 0.
// A malformed annotation yields 0 and an error so the caller can surface it
// as an Event instead of silently ignoring the user's intent.
func Criticality(rt *gantryv1.RTResource) (int32, error) {
	if rt.Spec.Criticality != nil {
		return clampCriticality(*rt.Spec.Criticality), nil
	}
	if v, ok := rt.Annotations[gantryv1.CriticalityAnnotation]; ok {
		return parseCriticality(v)
	}
	if v, ok := rt.Spec.Template.Annotations[gantryv1.CriticalityAnnotation]; ok {
		return parseCriticality(v)
	}
	return gantryv1.MinCriticality, nil
}

func parseCriticality(v string) (int32, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < gantryv1.MinCriticality || n > gantryv1.MaxCriticality {
		return gantryv1.MinCriticality, fmt.Errorf("%w: %s=%q, want an integer in %d..%d",
			ErrBadCriticality, gantryv1.CriticalityAnnotation, v, gantryv1.MinCriticality, gantryv1.MaxCriticality)
	}
	return int32(n), nil
}

// clampCriticality guards against objects written before the CRD's bounds
// were in force; the schema normally makes this a no-op.
func clampCriticality(c int32) int32 {
	return max(gantryv1.MinCriticality, min(gantryv1.MaxCriticality, c))
}
