package rtcontroller

import (
	"errors"
	"testing"

	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

func TestCriticalityPrecedence(t *testing.T) {
	cases := []struct {
		name       string
		spec       *int32
		obj, tmpl  string
		want       int32
		wantBadErr bool
	}{
		{name: "spec wins over annotations", spec: ptr.To[int32](42), obj: "7", tmpl: "8", want: 42},
		{name: "object annotation before template", obj: "7", tmpl: "8", want: 7},
		{name: "template annotation as in a Knative revision", tmpl: "8", want: 8},
		{name: "nothing set means least critical", want: 0},
		{name: "malformed annotation", obj: "high", want: 0, wantBadErr: true},
		{name: "annotation out of range", tmpl: "150", want: 0, wantBadErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := testRT(1)
			rt.Spec.Criticality = tc.spec
			if tc.obj != "" {
				rt.Annotations = map[string]string{gantryv1.CriticalityAnnotation: tc.obj}
			}
			if tc.tmpl != "" {
				rt.Spec.Template.Annotations = map[string]string{gantryv1.CriticalityAnnotation: tc.tmpl}
			}
			got, err := Criticality(rt)
			if got != tc.want || errors.Is(err, ErrBadCriticality) != tc.wantBadErr {
				t.Fatalf("Criticality = %d, %v; want %d, bad=%v", got, err, tc.want, tc.wantBadErr)
			}
		})
	}
}
