#!/usr/bin/env bash
# Builds Knative's KIngress conformance suite (knative.dev/networking at the
# version knative.dev/serving v0.50.0 requires, pinned in go.mod here) and
# its test images as programs, cached under
# $GANTRY_CACHE/knative-conformance/<version>/, then runs it against
# Gantry's ingress on the local control plane with a process node
# (TestKnativeIngressConformance in pkg/knativeingress; needs root for the
# pods' network namespaces). Results: the test's log, and conformance.log
# in the cache folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(cd "$here" && go list -m -f '{{.Version}}' knative.dev/networking)
out=${GANTRY_CACHE:-$HOME/.cache/gantry}/knative-conformance/$version
mkdir -p "$out/images"
cd "$here"
[ -x "$out/conformance.test" ] || go test -c -o "$out/conformance.test" .
for image in runtime timeout wsserver grpc-ping httpproxy retry; do
	[ -x "$out/images/$image" ] || go build -o "$out/images/$image" "knative.dev/networking/test/test_images/$image"
done
cd "$here/../.."
GANTRY_KNATIVE_CONFORMANCE=$out exec go test -count=1 -v -timeout 45m -run TestKnativeIngressConformance ./pkg/knativeingress
