package orchbench

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"gantry.dev/gantry/pkg/knativeingress"
	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/localcluster"
)

// TestKnativeRunDetectsTheKPAsTriggerInBothArms runs a tiny RQ1 on
// Knative, both arms one after the other on one local control plane with
// Knative Serving (as --kubeconfig does): two Services, one short
// iteration at interval:5. It checks the JSON's shape and that in each arm
// the KPA's /scale writes were seen as triggers, attributed to Knative's
// autoscaler, and timed to starts processing and pods created, and that
// the traffic was answered through Gantry's ingress.
//
// It needs root (the process node's network namespaces) and `make
// knative`'s build, as TestKnativeGetsReadyOnTheLocalControlPlane does.
func TestKnativeRunDetectsTheKPAsTriggerInBothArms(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and Knative; skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: Knative's pods run on a process node, in network namespaces of their own")
	}
	if err := knativeinstall.RequireBuild(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := localcluster.Start(ctx, localcluster.Options{
		Nodes: 1, ProcessNodes: 1, Scheduler: true, ControllerManager: true, Knative: true,
		Programs: map[string]string{"gantry": self}, KnativeIngress: "127.0.0.1:0",
		StartIngress: func(kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, addr string) (localcluster.Ingress, error) {
			srv, err := knativeingress.Start(knativeingress.Config{Kube: kube, Dynamic: dyn, Logger: log}, addr, "127.0.0.1:0")
			if err != nil {
				return nil, err // not a nil *Server in a non-nil interface
			}
			return srv, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	}()

	o := tinyOptions(t, c.KubeconfigPath())
	o.Knative = true
	o.KN = DefaultKnativeOptions()
	o.KN.Ingress = c.KnativeIngressAddr()
	o.KN.Warmup = time.Second
	o.Cases = []Case{{ModeInterval, 5}}
	o.Iteration = 12 * time.Second
	o.StageTimeout = time.Minute
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Interrupted {
		t.Fatal("run reports itself interrupted")
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", raw)
	var doc struct {
		Runs       []map[string]any `json:"runs"`
		Reductions []map[string]any `json:"reductions"`
		Requests   []RequestStats   `json:"requests"`
		Triggers   []TriggerStats   `json:"triggers"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	stages := []string{"starts_processing", "pods_created", "pods_running_ready", "request_latency"}
	if len(doc.Runs) != 2*len(stages) || len(doc.Reductions) != len(stages) {
		t.Fatalf("want %d runs and %d reductions", 2*len(stages), len(stages))
	}
	n := map[[2]string]float64{}
	for _, run := range doc.Runs {
		for _, k := range []string{"controller", "mode", "burst", "stage", "n", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "std_ms", "missed"} {
			if _, ok := run[k]; !ok {
				t.Errorf("run %v lacks %q", run, k)
			}
		}
		n[[2]string{run["controller"].(string), run["stage"].(string)}], _ = run["n"].(float64)
	}
	for i, red := range doc.Reductions {
		if red["stage"] != stages[i] {
			t.Errorf("reduction %d is for %v, want %s", i, red["stage"], stages[i])
		}
		if _, ok := red["median_reduction"]; !ok {
			t.Errorf("reduction %v lacks median_reduction", red)
		}
	}
	for _, ctl := range []string{Vanilla, Gantry} {
		for _, st := range []string{"starts_processing", "pods_created", "request_latency"} {
			if n[[2]string{ctl, st}] < 1 {
				t.Errorf("%s: no %s sample", ctl, st)
			}
		}
	}
	if len(doc.Triggers) != 2 || len(doc.Requests) != 2 {
		t.Fatalf("want triggers and requests of both arms, got %+v %+v", doc.Triggers, doc.Requests)
	}
	for _, tr := range doc.Triggers {
		if tr.Triggers < 1 || tr.Writers["autoscaler"] != tr.Triggers {
			t.Errorf("%s: triggers %+v, want at least one, each written by Knative's autoscaler through /scale", tr.Controller, tr)
		}
	}
	for _, rs := range doc.Requests {
		if rs.OK < 1 {
			t.Errorf("%s: no request answered: %+v", rs.Controller, rs)
		}
	}
}
