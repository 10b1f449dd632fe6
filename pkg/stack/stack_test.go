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
		{"secret name", "functions:\n  f:\n    fprocess: x\n    secrets: [Bad_Secret]\n", "stack.yml:2:"},
		{"limit unit", "functions:\n  f:\n    fprocess: x\n    limits: {memory: lots}\n", "not a quantity"},
		{"limit gpu", "functions:\n  f:\n    fprocess: x\n    limits: {nvidia.com/gpu: 1}\n", "only memory and cpu"},
		{"request over limit", "functions:\n  f:\n    fprocess: x\n    limits: {memory: 64Mi}\n    requests: {memory: 128Mi}\n", "above limits"},
		{"secret twice", "functions:\n  f:\n    fprocess: x\n    secrets: [s, s]\n", "twice"},
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

func TestParseReadsSecrets(t *testing.T) {
	s, err := Parse("stack.yml", []byte("functions:\n  f:\n    fprocess: x\n    secrets: [db-password, api.key]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Functions[0].Secrets, ","); got != "db-password,api.key" {
		t.Fatalf("secrets %q", got)
	}
}

func TestParseReadsLimitsAsWritten(t *testing.T) {
	s, err := Parse("stack.yml", []byte("functions:\n  f:\n    fprocess: x\n    limits: {memory: 128Mi, cpu: 500m}\n    requests: {memory: 64M}\n    readonly_root_filesystem: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := s.Functions[0]
	if f.Limits != (Resources{Memory: "128Mi", CPU: "500m"}) || f.Requests != (Resources{Memory: "64M"}) || !f.ReadOnlyRootFS || f.Limits.MemoryBytes() != 128<<20 {
		t.Fatalf("%+v %+v %v", f.Limits, f.Requests, f.ReadOnlyRootFS)
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
	f, err := FromAPI("fn", "img", "cat", nil, map[string]string{LabelScaleMax: "4"},
		map[string]string{AnnotationSLO: "300ms", AnnotationSizeRange: "1-100", AnnotationConcurrency: "2"})
	if err != nil {
		t.Fatal(err)
	}
	if f.MaxScale != 4 || f.SLO != 300*time.Millisecond || f.MinSize != 1 || f.MaxSize != 100 || f.Concurrency != 2 {
		t.Fatalf("%+v", f)
	}
	if _, err := FromAPI("fn", "img", "", nil, nil, nil); err != nil {
		t.Fatalf("image only must deploy (Kubernetes runs it): %v", err)
	}
	if _, err := FromAPI("fn", "", "", nil, nil, nil); !errors.Is(err, ErrInvalid) {
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
