package orchbench

import (
	"maps"
	"math"
	"strings"
	"testing"
)

// Two scrapes of kube-controller-manager's metrics, as its /metrics
// writes them, 5 s apart.
const kcmBefore = `# HELP workqueue_queue_duration_seconds [ALPHA] How long in seconds an item stays in workqueue before being requested.
# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{name="deployment",le="0.09999999999999999"} 10
workqueue_queue_duration_seconds_bucket{name="deployment",le="+Inf"} 10
workqueue_queue_duration_seconds_sum{name="deployment"} 0.05
workqueue_queue_duration_seconds_count{name="deployment"} 10
workqueue_queue_duration_seconds_sum{name="endpoints"} 99
workqueue_queue_duration_seconds_count{name="endpoints"} 99
workqueue_work_duration_seconds_sum{name="deployment"} 0.1
workqueue_work_duration_seconds_count{name="deployment"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="POST",le="0.1"} 40
rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="POST",le="1"} 40
rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="POST"} 0.2
rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="POST"} 40
`

const kcmAfter = `workqueue_queue_duration_seconds_bucket{name="deployment",le="0.09999999999999999"} 16
workqueue_queue_duration_seconds_bucket{name="deployment",le="+Inf"} 20
workqueue_queue_duration_seconds_sum{name="deployment"} 4.05
workqueue_queue_duration_seconds_count{name="deployment"} 20
workqueue_queue_duration_seconds_sum{name="endpoints"} 500
workqueue_queue_duration_seconds_count{name="endpoints"} 100
workqueue_work_duration_seconds_sum{name="deployment"} 0.3
workqueue_work_duration_seconds_count{name="deployment"} 20
rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="POST",le="0.1"} 50
rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="POST",le="1"} 55
rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="POST"} 10.2
rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="POST"} 60
rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="PUT",le="0.1"} 0
rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="PUT",le="1"} 0
rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 20
rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="PUT"} 10
`

func TestControllerManagerStatsAreTheDifferenceOfTwoScrapes(t *testing.T) {
	before, err := parseKCMMetrics(strings.NewReader(kcmBefore))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseKCMMetrics(strings.NewReader(kcmAfter))
	if err != nil {
		t.Fatal(err)
	}
	k := &knRun{runner: &runner{opts: Options{Cases: []Case{{ModeInterval, 20}}, Controllers: []string{Vanilla}}}, kcm: map[churnKey]*ControllerManagerStats{}}
	k.addKCM(Vanilla, Case{ModeInterval, 20}, before, after)
	got := k.kcmList()
	if len(got) != 1 {
		t.Fatalf("stats %+v, want one case", got)
	}
	st := got[0]
	dep := st.Queues[0]
	// 10 keys in 4 s of queue, 4 of them over 100 ms, 0.2 s of syncs;
	// the endpoints queue is not a scale-up's.
	if dep.Name != "deployment" || dep.Items != 10 || math.Abs(dep.QueueMeanMs-400) > 1e-6 || dep.QueueOver100ms != 4 || math.Abs(dep.WorkMeanMs-20) > 1e-6 {
		t.Errorf("deployment queue %+v, want 10 items, 400 ms mean wait, 4 over 100 ms, 20 ms syncs", dep)
	}
	if rs := st.Queues[1]; rs.Name != "replicaset" || rs.Items != 0 {
		t.Errorf("replicaset queue %+v, want no items", rs)
	}
	// 30 requests (20 POST, 10 PUT) that waited 30 s in all; 20 over
	// 100 ms, 15 over 1 s.
	if st.Requests != 30 || math.Abs(st.LimiterMeanMs-1000) > 1e-6 || st.LimiterOver100ms != 20 || st.LimiterOver1s != 15 {
		t.Errorf("limiter %+v, want 30 requests, 1000 ms mean, 20 over 100 ms, 15 over 1 s", st)
	}
	// A missing scrape adds nothing.
	k.addKCM(Vanilla, Case{ModeInterval, 20}, nil, after)
	if k.kcmList()[0].Requests != 30 {
		t.Error("a failed scrape changed the stats")
	}
}

// eachSeries gives a typed histogram's and counter's samples under the
// names of their text-format lines, and refuses a scrape that does not
// parse instead of reading part of it.
func TestEachSeriesReadsTypedFamiliesAsTheirSampleLines(t *testing.T) {
	scrape := `# HELP workqueue_queue_duration_seconds How long in seconds an item stays in workqueue.
# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{name="deployment",le="0.1"} 3
workqueue_queue_duration_seconds_bucket{name="deployment",le="+Inf"} 5
workqueue_queue_duration_seconds_sum{name="deployment"} 1.25
workqueue_queue_duration_seconds_count{name="deployment"} 5
# TYPE apiserver_terminated_watchers_total counter
apiserver_terminated_watchers_total{group="gantry.dev",resource="rtresources"} 4
`
	got := map[string]float64{}
	err := eachSeries(strings.NewReader(scrape), func(name string, labels map[string]string, v float64) {
		got[name+"{"+labels["name"]+labels["resource"]+","+labels["le"]+"}"] = v
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"workqueue_queue_duration_seconds_bucket{deployment,0.1}":  3,
		"workqueue_queue_duration_seconds_bucket{deployment,+Inf}": 5,
		"workqueue_queue_duration_seconds_sum{deployment,}":        1.25,
		"workqueue_queue_duration_seconds_count{deployment,}":      5,
		"apiserver_terminated_watchers_total{rtresources,}":        4,
	}
	if !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
	if err := eachSeries(strings.NewReader("workqueue_depth{name=\"x\" 3\n"), func(string, map[string]string, float64) {}); err == nil {
		t.Error("a scrape that does not parse was read")
	}
}
