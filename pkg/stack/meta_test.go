package stack

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A label, annotation or variable that means something to OpenFaaS or to
// the runtime is honoured or refused with the reason, over the API and in
// a stack file alike; plain metadata is kept.
func TestMeaningfulLabelsAnnotationsAndEnvAreHonouredOrRefused(t *testing.T) {
	refused := []struct {
		name string
		d    Deployment
		want string
	}{
		{"misspelt annotation", Deployment{Annotations: map[string]string{"gantry.dev/max_queue": "5"}}, "unknown annotation \"gantry.dev/max_queue\""},
		{"gantry label", Deployment{Labels: map[string]string{"gantry.dev/slo": "1s"}}, "unknown label"},
		{"scale target", Deployment{Labels: map[string]string{"com.openfaas.scale.target": "50"}}, "not for a per-instance target"},
		{"scale type", Deployment{Labels: map[string]string{"com.openfaas.scale.type": "rps"}}, "not on rps"},
		{"zero duration", Deployment{Labels: map[string]string{"com.openfaas.scale.zero-duration": "5m"}}, "--idle-timeout"},
		{"zero with a minimum", Deployment{Labels: map[string]string{LabelScaleZero: "true", LabelScaleMin: "2"}}, "scale min of 2"},
		{"zero not a bool", Deployment{Labels: map[string]string{LabelScaleZero: "yes"}}, "must be true or false"},
		{"health path", Deployment{Annotations: map[string]string{"com.openfaas.health.http.path": "/healthz"}}, "GET /_/health"},
		{"ready path", Deployment{Annotations: map[string]string{"com.openfaas.ready.http.path": "/ready"}}, "GET /_/health"},
		{"service account", Deployment{Annotations: map[string]string{"com.openfaas.serviceaccount": "reader"}}, "no service account is chosen per function"},
		{"profile", Deployment{Annotations: map[string]string{"com.openfaas.profile": "gpu"}}, "no OpenFaaS Profiles"},
		{"named queue", Deployment{Annotations: map[string]string{"com.openfaas.queue": "slow"}}, "share one queue"},
		{"retry attempts", Deployment{Annotations: map[string]string{"com.openfaas.retry.attempts": "3"}}, "only when the function is idempotent"},
		{"PORT", Deployment{EnvVars: map[string]string{"PORT": "9999"}}, "PORT is set by the runtime"},
		{"secrets dir", Deployment{EnvVars: map[string]string{"GANTRY_SECRETS_DIR": "/tmp"}}, "GANTRY_SECRETS_DIR is set by the runtime"},
		{"= in a name", Deployment{EnvVars: map[string]string{"A=B": "1"}}, "without '='"},
		{"concurrency 0", Deployment{Annotations: map[string]string{AnnotationConcurrency: "0"}}, "must be at least 1"},
		{"max-queue 0", Deployment{Annotations: map[string]string{AnnotationMaxQueue: "0"}}, "must be at least 1"},
		{"scale.max 0", Deployment{Labels: map[string]string{LabelScaleMax: "0"}}, "must be at least 1"},
		{"slo 0s", Deployment{Annotations: map[string]string{AnnotationSLO: "0s"}}, "must be above 0; leave it out"},
		{"cold-start 0s", Deployment{Annotations: map[string]string{AnnotationColdStart: "0s"}}, "must be above 0; leave it out"},
		{"size range with more after it", Deployment{Annotations: map[string]string{AnnotationSizeRange: "1-2xyz"}}, "must be MIN-MAX"},
		{"size header not a header name", Deployment{Annotations: map[string]string{AnnotationSizeHeader: "X Size:"}}, "not an HTTP header name"},
		{"empty label name", Deployment{Labels: map[string]string{"": "x"}}, `label name ""`},
		{"annotation name with a space", Deployment{Annotations: map[string]string{"my key": "x"}}, `annotation name "my key"`},
		{"two criticalities", Deployment{Annotations: map[string]string{AnnotationCriticality: "5", AnnotationKnativeCriticality: "7"}}, "disagree"},
	}
	for _, c := range refused {
		c.d.Service, c.d.EnvProcess = "fn", "cat"
		_, err := FromDeployment(c.d)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an invalid declaration saying %q", c.name, err, c.want)
		}
	}
	f, err := FromDeployment(Deployment{Service: "fn", EnvProcess: "cat", EnvVars: map[string]string{"MODE": "x"},
		Labels:      map[string]string{LabelScaleZero: "false", "com.openfaas.ui.ext": "png"},
		Annotations: map[string]string{"topic": "cron", "com.openfaas.health.http.path": "/_/health"}})
	if err != nil || f.MinScale != 1 {
		t.Fatalf("scale.zero=false: min %d, err %v; want min 1", f.MinScale, err)
	}
	if f, err = FromDeployment(Deployment{Service: "fn", EnvProcess: "cat", Labels: map[string]string{LabelScaleZero: "true"}}); err != nil || f.MinScale != 0 {
		t.Fatalf("scale.zero=true: min %d, err %v; want 0", f.MinScale, err)
	}
	// Gantry's settings travel as gantry.dev/<kebab-case> annotations,
	// cold_start among them.
	if f, err = FromDeployment(Deployment{Service: "fn", EnvProcess: "cat", Annotations: map[string]string{AnnotationColdStart: "250ms",
		AnnotationSizeRange: "1-64", AnnotationSizeHeader: "X-Size", AnnotationCriticality: "7", AnnotationKnativeCriticality: "7"}}); err != nil ||
		f.ColdStart != 250*time.Millisecond || f.MaxSize != 64 || f.SizeHeader != "X-Size" || f.Criticality != 7 {
		t.Fatalf("cold-start 250ms, size 1-64 in X-Size, criticality 7 twice: %+v, %v", f, err)
	}
	for _, field := range []string{"slo", "timeout", "cold_start", "async_deadline"} {
		_, err = Parse("stack.yml", []byte("functions:\n  fn:\n    fprocess: cat\n    "+field+": 0s\n"))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "must be above 0") {
			t.Errorf("stack file %s: 0s: %v, want it refused (the default would replace it unseen)", field, err)
		}
	}
	_, err = Parse("stack.yml", []byte("functions:\n  fn:\n    fprocess: cat\n    input_size: {header: 'X Size'}\n"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not an HTTP header name") {
		t.Errorf("stack file input_size.header 'X Size': %v, want it refused", err)
	}
	_, err = Parse("stack.yml", []byte("functions:\n  fn:\n    fprocess: cat\n    labels:\n      com.openfaas.scale.type: cpu\n"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "stack.yml:2") || !strings.Contains(err.Error(), "com.openfaas.scale.type") {
		t.Fatalf("stack file: %v, want the file, the line and the label", err)
	}
	s, err := Parse("stack.yml", []byte("functions:\n  fn:\n    fprocess: cat\n    labels:\n      com.openfaas.scale.zero: false\n"))
	if err != nil || s.Functions[0].MinScale != 1 {
		t.Fatalf("stack file scale.zero false: %v %+v", err, s)
	}
}

// ${NAME}, ${NAME:-DEFAULT} and ${NAME-DEFAULT} are expanded from the
// environment, as faas-cli expands them, in every field but the command
// (which its shell expands at the instance's start); an unset variable
// without a default is an error naming it.
func TestStackFileExpandsEnvironmentVariablesAsFaaSCLIDoes(t *testing.T) {
	t.Setenv("GANTRY_TEST_REGISTRY", "ghcr.io/me")
	t.Setenv("GANTRY_TEST_EMPTY", "")
	src := `functions:
  fn:
    fprocess: echo ${HOME}
    image: ${GANTRY_TEST_REGISTRY}/fn:${GANTRY_TEST_NO_TAG:-latest}
    environment:
      mode: ${GANTRY_TEST_EMPTY:-fallback}
      kept: ${GANTRY_TEST_EMPTY-fallback}
    labels:
      team: ${GANTRY_TEST_NOT_SET-core}
`
	s, err := Parse("stack.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	f := s.Functions[0]
	if f.Image != "ghcr.io/me/fn:latest" || f.Env["mode"] != "fallback" || f.Env["kept"] != "" ||
		f.Labels["team"] != "core" || f.Command != "echo ${HOME}" {
		t.Fatalf("image %q env %v labels %v command %q", f.Image, f.Env, f.Labels, f.Command)
	}
	for _, c := range []struct{ field, want string }{
		{"image: ${GANTRY_TEST_NOT_SET}/fn", "variable GANTRY_TEST_NOT_SET is not set"},
		{"image: ${GANTRY_TEST_REGISTRY:?x}", "only ${NAME}"},
		{"image: ${GANTRY_TEST_REGISTRY", "without a closing }"},
		{"image: ${1X}", "not a variable name"},
	} {
		_, err := Parse("stack.yml", []byte("functions:\n  fn:\n    fprocess: cat\n    "+c.field+"\n"))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "stack.yml:2") {
			t.Errorf("%s: %v, want an error at stack.yml:2 saying %q", c.field, err, c.want)
		}
	}
}
