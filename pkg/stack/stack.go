// Package stack declares the functions and apps Gantry serves. A stack file
// is YAML close to OpenFaaS's stack.yml, so a user's file carries over: the
// OpenFaaS fields (fprocess, image, environment, labels, annotations) keep
// their meaning, and Gantry adds the SLO, the criticality, scaling limits and
// where the input size comes from. The same declaration arrives over the
// OpenFaaS API as a deployment request (FromDeployment).
package stack

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/policy"
)

// ErrInvalid marks a declaration that cannot be served.
var ErrInvalid = errors.New("invalid declaration")

// Bounds every declaration is checked against before anything is allocated
// for it.
const (
	MaxCriticality = 99
	MaxInstances   = 1000
	MaxConcurrency = 1000
	MaxQueueBound  = policy.MaxQueueBound
	MaxChain       = 16
	MaxTimeout     = 10 * time.Minute
	// MaxAsyncDeadline bounds async_deadline.
	MaxAsyncDeadline = 24 * time.Hour
	MaxEnv           = 256
	// MaxFunctions bounds the functions (and the apps) one gateway serves.
	MaxFunctions = 1000
)

// Defaults for fields a declaration leaves out.
const (
	DefaultSLO         = time.Second
	DefaultConcurrency = 1
	DefaultMaxScale    = 20
	DefaultMaxQueue    = policy.DefaultMaxQueue
	DefaultTimeout     = 30 * time.Second
	DefaultColdStart   = time.Second
	// DefaultAsyncDeadline is the async deadline of a function that
	// declares none (or its SLO, if longer).
	DefaultAsyncDeadline = policy.DefaultAsyncDeadline
	// DefaultMaxSize is the size range a function whose sizes are body
	// lengths gets: bytes up to the gateway's default body limit.
	DefaultMaxSize = 64 << 20
)

// Input size units (input_size.unit; gantry.dev/size-unit).
const (
	SizeUnitB  = "B"
	SizeUnitKB = "KB"
	SizeUnitMB = "MB"
)

// SizeUnits are the units input_size.unit may name.
var SizeUnits = []string{SizeUnitB, SizeUnitKB, SizeUnitMB}

// UnitBytes is the bytes in one unit, binary as the example functions
// count them (examples/functions/doc.go); 0 for a unit that is not one of
// SizeUnits. The empty unit is the default, bytes.
func UnitBytes(unit string) float64 {
	switch unit {
	case SizeUnitB, "":
		return 1
	case SizeUnitKB:
		return 1 << 10
	case SizeUnitMB:
		return 1 << 20
	}
	return 0
}

// Backend kinds a function may ask for on Kubernetes.
const (
	KindRTResource = "rtresource"
	KindDeployment = "deployment"
)

// Function is one declared function.
type Function struct {
	Name string
	// Command is the process an instance runs (OpenFaaS's fprocess); a
	// leading word "gantry" means this very binary.
	Command string
	// Image is what Kubernetes runs; the local runtime ignores it.
	Image       string
	Env         map[string]string
	Labels      map[string]string
	Annotations map[string]string
	// SLO is the time within which a request must finish, queueing
	// included.
	SLO time.Duration
	// Criticality is 0 (least) to 99 (most critical), as RTResource's.
	Criticality int
	// MinScale and MaxScale bound the instances the autoscaler keeps.
	MinScale, MaxScale int
	// Concurrency is how many requests one instance runs at once.
	Concurrency int
	// SizeHeader names the request header that carries the input size
	// (when the body names a file); empty means the body's length.
	SizeHeader string
	// SizeUnit is the unit of the input size: B, KB or MB (binary: 1 KB
	// is 1024 B, as the example functions count). A size the body's
	// length gives is converted to it.
	SizeUnit string
	// MinSize and MaxSize bound the input sizes the policy bins.
	MinSize, MaxSize float64
	// SizeSensitive is false when the run time does not depend on input size.
	SizeSensitive bool
	// MaxQueue bounds the requests waiting for an instance; past it the
	// gateway answers 429.
	MaxQueue int
	// SLOTarget is the percentage of requests that must meet the SLO,
	// in (0, 100); 0 leaves it to the gateway (`gantry serve
	// --slo-target`). The gantry policy sizes the function's app for the
	// strictest target among its functions (policy.Spec.SLOTarget).
	SLOTarget float64
	// Timeout bounds one execution; past it the gateway answers 504.
	Timeout time.Duration
	// ColdStart is the expected cold start the policy plans with until
	// the runtime has measured one.
	ColdStart time.Duration
	// AsyncDeadline is an async invocation's deadline, from its 202: its
	// deadline class in the policy (policy.Enter); at least the SLO.
	AsyncDeadline time.Duration
	// Kind is the Kubernetes object that holds the instances.
	Kind string
	// Idempotent says a request may run twice: the gateway then retries
	// one an instance failed after receiving it on another instance;
	// otherwise only a request never delivered is retried.
	Idempotent bool
	// SocketActivation says the program takes its listening socket from
	// the runtime when passed one, systemd-style (LISTEN_FDS, LISTEN_PID,
	// descriptor 3; pkg/listenfd), and listens on $PORT when not. The
	// local runtime then opens the socket itself and sends requests to an
	// instance as soon as its process exists, instead of polling it until
	// it listens. It declares what the program can do: a backend that
	// cannot pass a socket (Kubernetes) starts it listening on its own.
	SocketActivation bool
	// Namespace is OpenFaaS's function namespace (DefaultNamespace when
	// empty); the registry keys functions by Ref.
	Namespace string
	// Secrets, Constraints, Limits, Requests and ReadOnlyRootFilesystem
	// are OpenFaaS's fields, kept as declared: the backend honours each
	// or refuses the function.
	Secrets                []string
	Constraints            []string
	Limits, Requests       Resources
	ReadOnlyRootFilesystem bool
	// Line is where the declaration starts in its stack file (0 over the API).
	Line int
}

// App is a chain of functions: each function's output is the next one's
// input.
type App struct {
	Name      string
	Functions []string
	// SLO is the end-to-end SLO; zero means the sum of the functions' SLOs.
	SLO  time.Duration
	Line int
}

// Stack is a parsed stack file.
type Stack struct {
	Functions []Function
	Apps      []App
}

var namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// CheckName reports whether name can name a function or app: a DNS-1123
// label, as Kubernetes and OpenFaaS require.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: name %q must be a DNS-1123 label (lower-case letters, digits and '-', at most 63)", ErrInvalid, name)
	}
	return nil
}

// Defaults fills the fields left at zero.
func (f *Function) Defaults() {
	setIfZero(&f.SLO, DefaultSLO)
	setIfZero(&f.Concurrency, DefaultConcurrency)
	setIfZero(&f.MaxQueue, DefaultMaxQueue)
	setIfZero(&f.Timeout, DefaultTimeout)
	setIfZero(&f.ColdStart, DefaultColdStart)
	setIfZero(&f.AsyncDeadline, max(DefaultAsyncDeadline, f.SLO))
	setIfZero(&f.Kind, KindRTResource)
	setIfZero(&f.Namespace, DefaultNamespace)
	setIfZero(&f.SizeUnit, SizeUnitB)
	if f.MaxScale == 0 {
		f.MaxScale = max(DefaultMaxScale, f.MinScale)
	}
	if f.MinSize == 0 && f.MaxSize == 0 {
		f.MinSize, f.MaxSize = 1, DefaultMaxSize
	}
}

func setIfZero[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate checks a function with its defaults applied.
func (f *Function) Validate() error {
	if err := CheckName(f.Name); err != nil {
		return err
	}
	checks := []struct {
		bad bool
		msg string
	}{
		{f.Command == "" && f.Image == "", "needs fprocess (a command) or an image"},
		{f.SLO <= 0 || f.SLO > MaxTimeout, fmt.Sprintf("slo %v must be in (0, %v]", f.SLO, MaxTimeout)},
		{f.Criticality < 0 || f.Criticality > MaxCriticality, fmt.Sprintf("criticality %d must be in [0, %d]", f.Criticality, MaxCriticality)},
		{f.MinScale < 0 || f.MaxScale < 1 || f.MinScale > f.MaxScale || f.MaxScale > MaxInstances,
			fmt.Sprintf("scale min %d, max %d must satisfy 0 <= min <= max, 1 <= max <= %d", f.MinScale, f.MaxScale, MaxInstances)},
		{f.Concurrency < 1 || f.Concurrency > MaxConcurrency, fmt.Sprintf("concurrency %d must be in [1, %d]", f.Concurrency, MaxConcurrency)},
		{f.MaxQueue < 1 || f.MaxQueue > MaxQueueBound, fmt.Sprintf("max_queue %d must be in [1, %d]", f.MaxQueue, MaxQueueBound)},
		{f.Timeout <= 0 || f.Timeout > MaxTimeout, fmt.Sprintf("timeout %v must be in (0, %v]", f.Timeout, MaxTimeout)},
		{!(f.SLOTarget == 0 || (f.SLOTarget > 1 && f.SLOTarget < 100)), fmt.Sprintf("slo_target %v must be a percentage in (1, 100), e.g. 99.9, or 0 for the gateway's", f.SLOTarget)},
		{f.ColdStart < 0 || f.ColdStart > MaxTimeout, fmt.Sprintf("cold_start %v must be in [0, %v]", f.ColdStart, MaxTimeout)},
		{f.AsyncDeadline < f.SLO || f.AsyncDeadline > MaxAsyncDeadline, fmt.Sprintf("async_deadline %v must be in [the slo %v, %v]", f.AsyncDeadline, f.SLO, MaxAsyncDeadline)},
		{!finitePositive(f.MinSize) || !finitePositive(f.MaxSize) || f.MinSize >= f.MaxSize,
			fmt.Sprintf("input size range [%v, %v] must be positive, finite and min < max", f.MinSize, f.MaxSize)},
		{UnitBytes(f.SizeUnit) == 0, fmt.Sprintf("input_size: unit %q must be one of %s", f.SizeUnit, strings.Join(SizeUnits, ", "))},
		{f.SizeHeader != "" && !headerName(f.SizeHeader),
			fmt.Sprintf("input_size: header %q is not an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~), so no request could carry it", f.SizeHeader)},
		{f.Kind != KindRTResource && f.Kind != KindDeployment, fmt.Sprintf("kind %q must be %q or %q", f.Kind, KindRTResource, KindDeployment)},
		{len(f.Env) > MaxEnv, fmt.Sprintf("at most %d environment variables", MaxEnv)},
		{len(f.Labels) > MaxEnv || len(f.Annotations) > MaxEnv, fmt.Sprintf("at most %d labels and %d annotations", MaxEnv, MaxEnv)},
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("%w: function %q: %s", ErrInvalid, f.Name, c.msg)
		}
	}
	if err := f.validateOpenFaaS(); err != nil {
		return fmt.Errorf("%w: function %q: %v", ErrInvalid, f.Name, err)
	}
	return nil
}

func finitePositive(x float64) bool { return x > 0 && !math.IsInf(x, 0) }

// headerName is an HTTP field name: a token of RFC 9110, at most 256
// bytes.
func headerName(s string) bool {
	if len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// Validate checks the stack as a whole: every function and app valid, names
// unique, every app's functions declared.
func (s *Stack) Validate() error {
	if len(s.Functions) > MaxFunctions || len(s.Apps) > MaxFunctions {
		return fmt.Errorf("%w: at most %d functions and %d apps", ErrInvalid, MaxFunctions, MaxFunctions)
	}
	seen := map[string]bool{}
	for i := range s.Functions {
		f := &s.Functions[i]
		if err := f.Validate(); err != nil {
			return err
		}
		if seen[f.Ref()] {
			return fmt.Errorf("%w: function %q declared twice", ErrInvalid, f.Name)
		}
		seen[f.Ref()] = true
	}
	apps := map[string]bool{}
	for _, a := range s.Apps {
		if err := a.Validate(seen); err != nil {
			return err
		}
		if apps[a.Name] {
			return fmt.Errorf("%w: app %q declared twice", ErrInvalid, a.Name)
		}
		apps[a.Name] = true
	}
	return nil
}

// Validate checks an app against the set of declared function names.
func (a *App) Validate(declared map[string]bool) error {
	if err := CheckName(a.Name); err != nil {
		return err
	}
	if len(a.Functions) == 0 || len(a.Functions) > MaxChain {
		return fmt.Errorf("%w: app %q must chain 1 to %d functions", ErrInvalid, a.Name, MaxChain)
	}
	if a.SLO < 0 || a.SLO > MaxTimeout {
		return fmt.Errorf("%w: app %q: slo %v must be in [0, %v]", ErrInvalid, a.Name, a.SLO, MaxTimeout)
	}
	for _, fn := range a.Functions {
		if !declared[fn] {
			return fmt.Errorf("%w: app %q chains undeclared function %q", ErrInvalid, a.Name, fn)
		}
	}
	return nil
}

// Scaling labels OpenFaaS users already set; Gantry honours them.
const (
	LabelScaleMin = "com.openfaas.scale.min"
	LabelScaleMax = "com.openfaas.scale.max"
)

// Annotations that carry Gantry's fields through the OpenFaaS API, whose
// deployment request has no place for them.
const (
	AnnotationSLO         = "gantry.dev/slo"
	AnnotationCriticality = "gantry.dev/criticality"
	AnnotationConcurrency = "gantry.dev/concurrency"
	AnnotationSizeHeader  = "gantry.dev/size-header"
	AnnotationSizeRange   = "gantry.dev/size-range" // "MIN-MAX"
	AnnotationSizeUnit    = "gantry.dev/size-unit"  // B, KB or MB
	// AnnotationSizeSensitive is input_size.sensitive: "true" or "false".
	AnnotationSizeSensitive = "gantry.dev/size-sensitive"
	AnnotationMaxQueue      = "gantry.dev/max-queue"
	AnnotationSLOTarget     = "gantry.dev/slo-target"
	AnnotationTimeout       = "gantry.dev/timeout"
	AnnotationKind          = "gantry.dev/kind"
	AnnotationAsyncDeadline = "gantry.dev/async-deadline"
	// AnnotationColdStart is cold_start: what the policy expects of a
	// start until one is measured.
	AnnotationColdStart  = "gantry.dev/cold-start"
	AnnotationIdempotent = "gantry.dev/idempotent" // "true" or "false"
	// AnnotationSocketActivation is socket_activation: "true" or "false".
	AnnotationSocketActivation = "gantry.dev/socket-activation"
	// AnnotationKnativeCriticality is the annotation PREEMPT-FaaS reads
	// on Knative services; it sets the criticality too.
	AnnotationKnativeCriticality = "autoscaling.knative.dev/application-criticality-level"
)

// applyMeta reads the scaling labels and Gantry's annotations into f. It
// runs after the explicit fields, which therefore win only where the map
// is silent.
func (f *Function) applyMeta() error {
	ints := []struct {
		m   map[string]string
		key string
		dst *int
	}{
		{f.Labels, LabelScaleMin, &f.MinScale}, {f.Labels, LabelScaleMax, &f.MaxScale},
		{f.Annotations, AnnotationKnativeCriticality, &f.Criticality},
		{f.Annotations, AnnotationCriticality, &f.Criticality},
		{f.Annotations, AnnotationConcurrency, &f.Concurrency},
		{f.Annotations, AnnotationMaxQueue, &f.MaxQueue},
	}
	for _, it := range ints {
		if v, ok := it.m[it.key]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%w: function %q: %s=%q is not an integer", ErrInvalid, f.Name, it.key, v)
			}
			// 0 is what a field left out holds, and Defaults fills it in:
			// written out, it would be replaced unseen.
			if n == 0 && it.dst != &f.MinScale && it.dst != &f.Criticality {
				return fmt.Errorf("%w: function %q: %s=%q must be at least 1", ErrInvalid, f.Name, it.key, v)
			}
			*it.dst = n
		}
	}
	durs := []struct {
		key string
		dst *time.Duration
	}{{AnnotationSLO, &f.SLO}, {AnnotationTimeout, &f.Timeout}, {AnnotationAsyncDeadline, &f.AsyncDeadline},
		{AnnotationColdStart, &f.ColdStart}}
	for _, it := range durs {
		if v, ok := f.Annotations[it.key]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%w: function %q: %s=%q: %v", ErrInvalid, f.Name, it.key, v, err)
			}
			if d == 0 {
				// 0 is what a setting left out holds: Defaults would
				// replace it unseen.
				return fmt.Errorf("%w: function %q: %s=%q must be above 0; leave it out for the default", ErrInvalid, f.Name, it.key, v)
			}
			*it.dst = d
		}
	}
	if a, b := f.Annotations[AnnotationCriticality], f.Annotations[AnnotationKnativeCriticality]; a != "" && b != "" && a != b {
		return fmt.Errorf("%w: function %q: %s=%q and %s=%q disagree: give one", ErrInvalid, f.Name,
			AnnotationCriticality, a, AnnotationKnativeCriticality, b)
	}
	if v, ok := f.Annotations[AnnotationSLOTarget]; ok {
		p, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%w: function %q: %s=%q is not a number", ErrInvalid, f.Name, AnnotationSLOTarget, v)
		}
		f.SLOTarget = p
	}
	if v, ok := f.Annotations[AnnotationSizeHeader]; ok {
		f.SizeHeader = v
	}
	if v, ok := f.Annotations[AnnotationSizeUnit]; ok {
		f.SizeUnit = v
		if UnitBytes(v) == 0 || v == "" {
			return fmt.Errorf("%w: function %q: %s=%q must be one of %s", ErrInvalid, f.Name, AnnotationSizeUnit, v, strings.Join(SizeUnits, ", "))
		}
	}
	if v, ok := f.Annotations[AnnotationKind]; ok {
		f.Kind = v
	}
	bools := []struct {
		key string
		dst *bool
	}{{AnnotationIdempotent, &f.Idempotent}, {AnnotationSocketActivation, &f.SocketActivation},
		{AnnotationSizeSensitive, &f.SizeSensitive}}
	for _, it := range bools {
		if v, ok := f.Annotations[it.key]; ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%w: function %q: %s=%q must be true or false", ErrInvalid, f.Name, it.key, v)
			}
			*it.dst = b
		}
	}
	if v, ok := f.Annotations[AnnotationSizeRange]; ok {
		// A third item scanned is something after MAX ("1-2xyz"), which
		// would otherwise be dropped.
		var rest string
		if n, _ := fmt.Sscanf(v, "%g-%g%s", &f.MinSize, &f.MaxSize, &rest); n != 2 {
			return fmt.Errorf("%w: function %q: %s=%q must be MIN-MAX", ErrInvalid, f.Name, AnnotationSizeRange, v)
		}
	}
	if err := f.checkMeta(); err != nil {
		return err
	}
	return f.applyScaleZero()
}

// Deployment is what an OpenFaaS deployment request declares.
type Deployment struct {
	Service, Image, Namespace, EnvProcess string
	EnvVars, Labels, Annotations          map[string]string
	Secrets, Constraints                  []string
	Limits, Requests                      Resources
	ReadOnlyRootFilesystem                bool
}

// FromDeployment builds a function from an OpenFaaS deployment request:
// its command is envProcess, as OpenFaaS's watchdog runs fprocess, and
// Gantry's own fields come from labels and annotations.
func FromDeployment(d Deployment) (Function, error) {
	f := Function{Name: d.Service, Image: d.Image, Command: d.EnvProcess, Env: d.EnvVars, Labels: d.Labels,
		Annotations: d.Annotations, SizeSensitive: true, Namespace: d.Namespace, Secrets: d.Secrets,
		Constraints: d.Constraints, Limits: d.Limits, Requests: d.Requests,
		ReadOnlyRootFilesystem: d.ReadOnlyRootFilesystem}
	if err := f.applyMeta(); err != nil {
		return Function{}, err
	}
	f.Defaults()
	if err := f.Validate(); err != nil {
		return Function{}, err
	}
	return f, nil
}
