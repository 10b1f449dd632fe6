package stack

// Labels, annotations and environment variables that mean something to
// OpenFaaS or to the runtime. A declaration that sets one of them expects
// it to act: each is either honoured (applyMeta) or refused here with the
// reason, never kept as inert metadata while the user believes it works.

import (
	"fmt"
	"slices"
	"strings"
)

// gantryPrefix is the prefix of Gantry's own annotations.
const gantryPrefix = "gantry.dev/"

// knownAnnotations are Gantry's annotations applyMeta reads.
var knownAnnotations = []string{AnnotationSLO, AnnotationCriticality, AnnotationConcurrency,
	AnnotationSizeHeader, AnnotationSizeRange, AnnotationSizeUnit, AnnotationSizeSensitive, AnnotationMaxQueue, AnnotationSLOTarget, AnnotationTimeout,
	AnnotationKind, AnnotationAsyncDeadline, AnnotationColdStart, AnnotationIdempotent, AnnotationSocketActivation}

// LabelScaleZero is OpenFaaS's com.openfaas.scale.zero: "false" keeps at
// least one instance (scale.min at least 1); "true" is Gantry's default,
// scaling to zero when idle, which a scale.min above 0 rules out.
const LabelScaleZero = "com.openfaas.scale.zero"

// openFaaSRefused are OpenFaaS labels and annotations whose behaviour this
// gateway does not have, with what to do instead.
var openFaaSRefused = map[string]string{
	"com.openfaas.scale.target":              "Gantry's policy sizes instances for the function's SLO, not for a per-instance target; set gantry.dev/slo (stack: slo) instead",
	"com.openfaas.scale.type":                "Gantry's policy scales on requests against the SLO, not on rps, capacity, cpu or memory; set gantry.dev/slo (stack: slo) instead",
	"com.openfaas.scale.target-proportion":   "Gantry's policy sizes instances for the function's SLO, not for a target proportion; set gantry.dev/slo (stack: slo) instead",
	"com.openfaas.scale.factor":              "Gantry's policy decides each scale step from the SLO; set gantry.dev/slo (stack: slo) instead",
	"com.openfaas.scale.zero-duration":       "idle instances are stopped after the gateway's --idle-timeout, not per function",
	"com.openfaas.health.http.initialDelay":  "instances are polled for readiness from their start (GET /_/health), not after a delay",
	"com.openfaas.health.http.periodSeconds": "instances are polled for readiness at the gateway's own pace (GET /_/health)",
	// OpenFaaS's readiness probe: here one check, GET /_/health, serves
	// for both.
	"com.openfaas.ready.http.path":          "instances are checked for readiness at GET /_/health, not at a path of their own",
	"com.openfaas.ready.http.initialDelay":  "instances are polled for readiness from their start (GET /_/health), not after a delay",
	"com.openfaas.ready.http.periodSeconds": "instances are polled for readiness at the gateway's own pace (GET /_/health)",
	// faas-netes sets the pod's service account, applies a Profile
	// (tolerations, affinity, runtime class) or routes async calls to a
	// named queue: none of them exists here.
	"com.openfaas.serviceaccount": "instances run as the gateway's own processes, or as pods with their namespace's default service account; no service account is chosen per function",
	"com.openfaas.profile":        "there are no OpenFaaS Profiles here; a constraint (constraints) places a function",
	"com.openfaas.queue":          "async invocations share one queue, ordered by criticality (gantry.dev/criticality), not named queues",
	// The Pro queue-worker's retries of a failed async invocation.
	"com.openfaas.retry.attempts": "a failed invocation is retried only when the function is idempotent (gantry.dev/idempotent), on another instance; callbacks by --async-callback-retries",
	"com.openfaas.retry.codes":    "a failed invocation is retried only when the function is idempotent (gantry.dev/idempotent), on another instance; callbacks by --async-callback-retries",
	"com.openfaas.retry.min_wait": "a failed invocation is retried only when the function is idempotent (gantry.dev/idempotent), on another instance; callbacks by --async-callback-retries",
	"com.openfaas.retry.max_wait": "a failed invocation is retried only when the function is idempotent (gantry.dev/idempotent), on another instance; callbacks by --async-callback-retries",
}

// healthPath is where every instance answers its readiness check.
const healthPath = "/_/health"

// reservedEnv are the variables the runtime sets for every instance: a
// declaration setting one would break the instance (a PORT of its own
// makes it listen where nothing is sent) or be overridden unseen.
var reservedEnv = []string{"PORT", "GANTRY_FUNCTION_NAME", "POD_IP", "LISTEN_FDS", "LISTEN_PID",
	"LISTEN_FDNAMES", "GANTRY_SECRETS_DIR"}

// checkMeta refuses unknown gantry.dev/
// annotations (a misspelt one would otherwise be ignored), OpenFaaS
// scaling and health settings this gateway does not carry out, and
// environment variables that are the runtime's.
func (f *Function) checkMeta() error {
	for _, meta := range []struct {
		kind string
		m    map[string]string
	}{{"annotation", f.Annotations}, {"label", f.Labels}} {
		if err := CheckMetaKeys(meta.kind, meta.m); err != nil {
			return fmt.Errorf("%w: function %q: %v", ErrInvalid, f.Name, err)
		}
		for _, k := range sortedKeys(meta.m) {
			v := meta.m[k]
			if strings.HasPrefix(k, gantryPrefix) && (meta.kind == "label" || !slices.Contains(knownAnnotations, k)) {
				return fmt.Errorf("%w: function %q: unknown %s %q: Gantry's settings are the annotations %s",
					ErrInvalid, f.Name, meta.kind, k, strings.Join(knownAnnotations, ", "))
			}
			if why, ok := openFaaSRefused[k]; ok {
				return fmt.Errorf("%w: function %q: %s %s=%q is not supported: %s", ErrInvalid, f.Name, meta.kind, k, v, why)
			}
			if k == "com.openfaas.health.http.path" && v != healthPath {
				return fmt.Errorf("%w: function %q: %s %s=%q is not supported: instances are checked at GET %s",
					ErrInvalid, f.Name, meta.kind, k, v, healthPath)
			}
		}
	}
	for _, k := range sortedKeys(f.Env) {
		if slices.Contains(reservedEnv, k) {
			return fmt.Errorf("%w: function %q: environment variable %s is set by the runtime for every instance (reserved: %s)",
				ErrInvalid, f.Name, k, strings.Join(reservedEnv, ", "))
		}
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(f.Env[k], 0) {
			return fmt.Errorf("%w: function %q: environment variable %q: a name must be non-empty without '=' or NUL, a value without NUL",
				ErrInvalid, f.Name, k)
		}
	}
	return nil
}

// applyScaleZero honours com.openfaas.scale.zero after the scale bounds
// are read.
func (f *Function) applyScaleZero() error {
	v, ok := f.Labels[LabelScaleZero]
	if !ok {
		return nil
	}
	switch v {
	case "false":
		f.MinScale = max(f.MinScale, 1)
	case "true":
		if f.MinScale > 0 {
			return fmt.Errorf("%w: function %q: %s=true with a scale min of %d: OpenFaaS's scaling to zero from a minimum above 0 is not supported; keep one of the two",
				ErrInvalid, f.Name, LabelScaleZero, f.MinScale)
		}
	default:
		return fmt.Errorf("%w: function %q: %s=%q must be true or false", ErrInvalid, f.Name, LabelScaleZero, v)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// maxMetaKey is the longest label or annotation name: Kubernetes' prefix
// of 253 and name of 63, with the slash between them.
const maxMetaKey = 253 + 1 + 63

// CheckMetaKeys refuses a label or annotation name that no Kubernetes
// object could carry: empty, longer than a qualified name, or holding
// spaces or control characters (an empty one was kept as if it meant
// something). kind is "label" or "annotation".
func CheckMetaKeys(kind string, m map[string]string) error {
	for _, k := range sortedKeys(m) {
		bad := k == "" || len(k) > maxMetaKey
		for _, c := range []byte(k) {
			bad = bad || c <= ' ' || c >= 0x7f
		}
		if bad {
			return fmt.Errorf("%s name %q must be 1 to %d printable characters without spaces", kind, k, maxMetaKey)
		}
	}
	return nil
}
