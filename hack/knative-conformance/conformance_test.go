// Package conformance builds Knative's KIngress conformance suite
// (knative.dev/networking/test/conformance/ingress) at the version that
// knative.dev/serving v0.50.0 requires, to run against Gantry's ingress
// (run.sh; docs/knative.md).
package conformance

import (
	"testing"

	"knative.dev/networking/test/conformance/ingress"
)

func TestIngressConformance(t *testing.T) { ingress.RunConformance(t) }
