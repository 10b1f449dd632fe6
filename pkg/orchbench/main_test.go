package orchbench

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"gantry.dev/gantry/pkg/localcluster"
)

func TestMain(m *testing.M) {
	// On the Knative test's process node the image dev.local/gantry-fn:NAME
	// runs `gantry fn NAME`, and "gantry" is this binary: it then serves
	// the Services' requests on $PORT, as `gantry fn` would.
	if len(os.Args) > 2 && os.Args[1] == "fn" {
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "positive") })
		fmt.Fprintln(os.Stderr, http.ListenAndServe(":"+os.Getenv("PORT"), nil))
		os.Exit(1)
	}
	os.Exit(localcluster.RunMain(m, localcluster.Options{Nodes: 2, Scheduler: true, ControllerManager: true}))
}
