package stack

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sample = `version: 1.0
provider:
  name: openfaas
  gateway: http://127.0.0.1:8080
functions:
  resize:
    lang: go
    handler: ./resize
    image: example/resize:latest
    fprocess: ./resize --fast
    environment:
      QUALITY: "80"
    labels:
      com.openfaas.scale.min: "1"
      com.openfaas.scale.max: "6"
    slo: 800ms
    criticality: 40
    input_size: {header: X-Input-Size, min: 0.1, max: 8}
  notify:
    image: example/notify:latest
    annotations:
      autoscaling.knative.dev/application-criticality-level: "7"
    input_size: {sensitive: false}
apps:
  pipeline:
    functions: [resize, notify]
    slo: 2s
`

func TestParseReadsOpenFaaSAndGantryFields(t *testing.T) {
	s, err := Parse("stack.yml", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Functions) != 2 || s.Functions[0].Name != "resize" || s.Functions[1].Name != "notify" {
		t.Fatalf("functions %+v", s.Functions)
	}
	r := s.Functions[0]
	if r.Command != "./resize --fast" || r.Env["QUALITY"] != "80" || r.MinScale != 1 || r.MaxScale != 6 ||
		r.SLO != 800*time.Millisecond || r.Criticality != 40 || r.SizeHeader != "X-Input-Size" ||
		r.MinSize != 0.1 || r.MaxSize != 8 || r.Line != 6 || !r.SizeSensitive {
		t.Fatalf("resize %+v", r)
	}
	n := s.Functions[1]
	if n.Criticality != 7 || n.SizeSensitive || n.SLO != DefaultSLO || n.Concurrency != 1 || n.MaxSize != DefaultMaxSize {
		t.Fatalf("notify %+v", n)
	}
	if len(s.Apps) != 1 || s.Apps[0].SLO != 2*time.Second || strings.Join(s.Apps[0].Functions, ",") != "resize,notify" {
		t.Fatalf("apps %+v", s.Apps)
	}
}

func TestParseErrorsNameTheFileAndLine(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown field", "functions:\n  f:\n    fprocess: x\n    colour: red\n", "stack.yml: invalid declaration: yaml: unmarshal errors:\n  line 4"},
		{"bad slo", "functions:\n  f:\n    fprocess: x\n  g:\n    fprocess: y\n    slo: fast\n", "stack.yml:4:"},
		{"criticality", "functions:\n  f:\n    fprocess: x\n    criticality: 100\n", "stack.yml:2:"},
		{"no command", "functions:\n  f:\n    lang: go\n", "stack.yml:2:"},
		{"bad name", "functions:\n  Big_Name:\n    fprocess: x\n", "stack.yml:2:"},
		{"undeclared", "functions:\n  f:\n    fprocess: x\napps:\n  a:\n    functions: [f, g]\n", "stack.yml:5:"},
		{"scale", "functions:\n  f:\n    fprocess: x\n    scale: {min: 5, max: 2}\n", "stack.yml:2:"},
		{"label", "functions:\n  f:\n    fprocess: x\n    labels: {com.openfaas.scale.max: lots}\n", "stack.yml:2:"},
		{"environment_file", "functions:\n  f:\n    fprocess: x\n    environment_file: [e.yml]\n", "not supported"},
		{"empty", "", "empty stack file"},
		{"not yaml", "functions: [\n", "stack.yml: invalid declaration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("stack.yml", []byte(c.yaml))
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an ErrInvalid containing %q", err, c.want)
			}
		})
	}
}

func TestParseFileBoundsItsSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yml")
	if err := os.WriteFile(path, make([]byte, MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("got %v", err)
	}
}

func TestFromAPIReadsAnnotations(t *testing.T) {
	f, err := FromDeployment(Deployment{Service: "fn", Image: "img", EnvProcess: "cat", Labels: map[string]string{LabelScaleMax: "4"},
		Annotations: map[string]string{AnnotationSLO: "300ms", AnnotationSizeRange: "1-100", AnnotationConcurrency: "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.MaxScale != 4 || f.SLO != 300*time.Millisecond || f.MinSize != 1 || f.MaxSize != 100 || f.Concurrency != 2 {
		t.Fatalf("%+v", f)
	}
	if _, err := FromDeployment(Deployment{Service: "fn", Image: "img"}); err != nil {
		t.Fatalf("image only must deploy (Kubernetes runs it): %v", err)
	}
	if _, err := FromDeployment(Deployment{Service: "fn"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nothing to run: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("functions:\n  f:\n    fprocess: x\n    scale: {min: 1}\n"))
	f.Add([]byte("apps:\n  a:\n    functions: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse returned a stack that does not validate: %v", err)
		}
	})
}

// idempotent: true in the stack file and gantry.dev/idempotent over the
// API both declare a function whose requests may run twice; anything but
// a boolean is refused.
func TestIdempotentFromTheStackAndTheAPI(t *testing.T) {
	s, err := Parse("stack.yml", []byte("functions:\n  f:\n    fprocess: x\n    idempotent: true\n  g:\n    fprocess: y\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Functions[0].Idempotent || s.Functions[1].Idempotent {
		t.Fatalf("idempotent %v %v, want true false", s.Functions[0].Idempotent, s.Functions[1].Idempotent)
	}
	if _, err := Parse("stack.yml", []byte("functions:\n  f:\n    fprocess: x\n    idempotent: maybe\n")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("idempotent: maybe: %v, want ErrInvalid", err)
	}
	f, err := FromDeployment(Deployment{Service: "fn", EnvProcess: "cat", Annotations: map[string]string{AnnotationIdempotent: "true"}})
	if err != nil || !f.Idempotent {
		t.Fatalf("annotation true: %+v %v", f.Idempotent, err)
	}
	if _, err := FromDeployment(Deployment{Service: "fn", EnvProcess: "cat", Annotations: map[string]string{AnnotationIdempotent: "yes please"}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), AnnotationIdempotent) {
		t.Fatalf("annotation yes please: %v, want ErrInvalid naming the annotation", err)
	}
}

// OpenFaaS's deployment fields reach the function whole; bad quantities
// and unknown resource keys are refused with the line.
func TestParseKeepsOpenFaaSDeploymentFields(t *testing.T) {
	s, err := Parse("stack.yml", []byte(`functions:
  f:
    fprocess: cat
    namespace: staging
    secrets: [db]
    constraints: ["node.platform.os == linux"]
    limits: {memory: 128Mi, cpu: 500m}
    requests: {memory: 64Mi}
    readonly_root_filesystem: true
`))
	if err != nil {
		t.Fatal(err)
	}
	f := s.Functions[0]
	if f.Namespace != "staging" || f.Ref() != "f.staging" || f.Qualified() != "f.staging" || len(f.Secrets) != 1 ||
		len(f.Constraints) != 1 || f.Limits.Memory != "128Mi" || f.Limits.CPU != "500m" || f.Requests.Memory != "64Mi" ||
		!f.ReadOnlyRootFilesystem || f.Limits.MemoryBytes() != 128<<20 {
		t.Fatalf("%+v", f)
	}
	for _, bad := range []string{"limits: {memory: lots}", "limits: {disk: 1Gi}", "namespace: Bad_NS", "requests: {cpu: \"-1\"}"} {
		if _, err := Parse("s.yml", []byte("functions:\n  f:\n    fprocess: cat\n    "+bad+"\n")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "s.yml:") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestRefsNameOneFunctionPerNamespace(t *testing.T) {
	for in, want := range map[string]string{"f": "f", "f.openfaas-fn": "f", "f.staging": "f.staging"} {
		if got := CanonicalRef(in); got != want {
			t.Errorf("CanonicalRef(%q) = %q, want %q", in, got, want)
		}
	}
	if QualifiedRef("f") != "f.openfaas-fn" || QualifiedRef("f.staging") != "f.staging" {
		t.Fatal("qualified names")
	}
}

// socket_activation in the stack file and gantry.dev/socket-activation
// over the API both declare a program that takes a passed socket; anything
// but a boolean is refused.
func TestSocketActivationFromTheStackAndTheAPI(t *testing.T) {
	s, err := Parse("stack.yml", []byte("functions:\n  f:\n    fprocess: x\n    socket_activation: true\n  g:\n    fprocess: y\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Functions[0].SocketActivation || s.Functions[1].SocketActivation {
		t.Fatalf("socket_activation %v %v, want true false", s.Functions[0].SocketActivation, s.Functions[1].SocketActivation)
	}
	if _, err := Parse("stack.yml", []byte("functions:\n  f:\n    fprocess: x\n    socket_activation: often\n")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("socket_activation: often: %v, want ErrInvalid", err)
	}
	f, err := FromDeployment(Deployment{Service: "fn", EnvProcess: "cat", Annotations: map[string]string{AnnotationSocketActivation: "true"}})
	if err != nil || !f.SocketActivation {
		t.Fatalf("annotation true: %+v %v", f.SocketActivation, err)
	}
	if _, err := FromDeployment(Deployment{Service: "fn", EnvProcess: "cat", Annotations: map[string]string{AnnotationSocketActivation: "on"}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), AnnotationSocketActivation) {
		t.Fatalf("annotation on: %v, want ErrInvalid naming the annotation", err)
	}
}

// input_size.unit is B, KB or MB (default B) in a stack file and as
// gantry.dev/size-unit over the API; input_size.sensitive travels as
// gantry.dev/size-sensitive. Anything else is refused naming the field.
func TestInputSizeUnit(t *testing.T) {
	fn := func(inputSize string) string {
		return "functions:\n  f:\n    fprocess: cat\n    input_size: " + inputSize + "\n"
	}
	s, err := Parse("stack.yml", []byte(fn("{unit: KB, min: 1, max: 64, sensitive: false}")))
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Functions[0]; f.SizeUnit != SizeUnitKB || f.SizeSensitive || f.MinSize != 1 || f.MaxSize != 64 {
		t.Fatalf("%+v", f)
	}
	if s, err = Parse("stack.yml", []byte(fn("{min: 1, max: 64}"))); err != nil || s.Functions[0].SizeUnit != SizeUnitB || !s.Functions[0].SizeSensitive {
		t.Fatalf("default unit: %v %+v", err, s)
	}
	_, err = Parse("stack.yml", []byte(fn("{unit: GB, min: 1, max: 64}")))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "stack.yml:2:") || !strings.Contains(err.Error(), `input_size: unit "GB" must be one of B, KB, MB`) {
		t.Fatalf("unit GB: %v", err)
	}
	for unit, want := range map[string]float64{"B": 1, "KB": 1024, "MB": 1 << 20, "kb": 0, "GB": 0} {
		if got := UnitBytes(unit); got != want {
			t.Errorf("UnitBytes(%q) = %v, want %v", unit, got, want)
		}
	}
	f, err := FromDeployment(Deployment{Service: "fn", EnvProcess: "cat",
		Annotations: map[string]string{AnnotationSizeUnit: "MB", AnnotationSizeRange: "0.1-8", AnnotationSizeSensitive: "false"}})
	if err != nil || f.SizeUnit != SizeUnitMB || f.SizeSensitive || f.MaxSize != 8 {
		t.Fatalf("annotations: %v %+v", err, f)
	}
	for _, bad := range []map[string]string{{AnnotationSizeUnit: "GB"}, {AnnotationSizeUnit: ""}, {AnnotationSizeSensitive: "maybe"}} {
		if _, err := FromDeployment(Deployment{Service: "fn", EnvProcess: "cat", Annotations: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: %v, want refused", bad, err)
		}
	}
}

// A misspelt or misplaced field is named with where it is, in the stack
// file's own words: before, the message named this package's Go types
// ("field sloo not found in type stack.functionYAML").
func TestUnknownFieldsAreNamedInTheStackFilesWords(t *testing.T) {
	for yml, want := range map[string]string{
		"functions: {a: {fprocess: x, sloo: 1s}}": "field sloo is not a field of a function",
		"functionz: {}": "field functionz is not a stack-file field",
		"functions: {a: {fprocess: x, scale: {mn: 1}}}": "field mn is not a field of scale (min, max)",
		"functions: [a]": "into functions (NAME: {fprocess: ...})",
		"functions: {a: {fprocess: x, input_size: {h: x}}}": "field h is not a field of input_size",
		"provider: {nam: x}":   "field nam is not a field of provider",
		"apps: {a: {fn: [x]}}": "field fn is not a field of an app",
	} {
		_, err := Parse("s.yml", []byte(yml))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "YAML") {
			t.Errorf("%s: %v, want %q", yml, err, want)
		}
	}
}
