package knativert

import (
	"os"
	"testing"

	"gantry.dev/gantry/pkg/localcluster"
)

// One control plane for the package's cluster tests, started on first use.
// The controller manager runs the Deployment controller (a critical
// Revision's Deployment at 0 replicas gets Knative's conditions), the
// garbage collector and the service-account controller; no node is
// needed: the tests check the pods the RTResource creates, not that they
// run.
func TestMain(m *testing.M) {
	os.Exit(localcluster.RunMain(m, localcluster.Options{ControllerManager: true}))
}
