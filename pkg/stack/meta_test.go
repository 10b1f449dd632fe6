package stack

import (
	"errors"
	"strings"
	"testing"
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
		{"PORT", Deployment{EnvVars: map[string]string{"PORT": "9999"}}, "PORT is set by the runtime"},
		{"secrets dir", Deployment{EnvVars: map[string]string{"GANTRY_SECRETS_DIR": "/tmp"}}, "GANTRY_SECRETS_DIR is set by the runtime"},
		{"= in a name", Deployment{EnvVars: map[string]string{"A=B": "1"}}, "without '='"},
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
	_, err = Parse("stack.yml", []byte("functions:\n  fn:\n    fprocess: cat\n    labels:\n      com.openfaas.scale.type: cpu\n"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "stack.yml:2") || !strings.Contains(err.Error(), "com.openfaas.scale.type") {
		t.Fatalf("stack file: %v, want the file, the line and the label", err)
	}
	s, err := Parse("stack.yml", []byte("functions:\n  fn:\n    fprocess: cat\n    labels:\n      com.openfaas.scale.zero: false\n"))
	if err != nil || s.Functions[0].MinScale != 1 {
		t.Fatalf("stack file scale.zero false: %v %+v", err, s)
	}
}
