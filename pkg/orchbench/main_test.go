package orchbench

import (
	"os"
	"testing"

	"gantry.dev/gantry/pkg/localcluster"
)

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunMain(m, localcluster.Options{Nodes: 2, Scheduler: true, ControllerManager: true}))
}
