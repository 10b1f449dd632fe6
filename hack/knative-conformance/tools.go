//go:build tools

// The conformance suite's test images, built as programs for the process
// node (run.sh; docs/knative.md): pinned here so go.mod holds what they need.
package conformance

import (
	_ "knative.dev/networking/test/test_images/grpc-ping"
	_ "knative.dev/networking/test/test_images/httpproxy"
	_ "knative.dev/networking/test/test_images/retry"
	_ "knative.dev/networking/test/test_images/runtime"
	_ "knative.dev/networking/test/test_images/timeout"
	_ "knative.dev/networking/test/test_images/wsserver"
)
