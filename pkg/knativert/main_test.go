package knativert

import (
	"os"
	"testing"

	"gantry.dev/gantry/pkg/localcluster"
)

// One control plane for the package's cluster tests, started on first use.
// The controller manager runs the Deployment controller (a critical
// Revision's Deployment at 0 replicas gets Knative's conditions), the
// garbage collector and the service-account controller; the scheduler and
// a kwok node make the RTResource's pods Ready, which a hand-over from a
// running Deployment waits for.
func TestMain(m *testing.M) {
	os.Exit(localcluster.RunMain(m, localcluster.Options{Nodes: 1, Scheduler: true, ControllerManager: true}))
}
