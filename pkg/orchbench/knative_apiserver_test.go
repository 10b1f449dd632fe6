package orchbench

import (
	"math"
	"strings"
	"testing"
)

// The API server's stats are the difference of two scrapes per series:
// a histogram's mean in ms (bytes for a size), a counter's increase, and
// a series that did not move is left out.
func TestAPIServerStatsAreTheDifferenceOfTwoScrapes(t *testing.T) {
	before := `# HELP apiserver_request_duration_seconds x
apiserver_request_duration_seconds_bucket{group="gantry.dev",resource="rtresources",subresource="status",verb="PUT",le="0.1"} 1
apiserver_request_duration_seconds_sum{group="gantry.dev",resource="rtresources",subresource="status",verb="PUT"} 0.5
apiserver_request_duration_seconds_count{group="gantry.dev",resource="rtresources",subresource="status",verb="PUT"} 2
apiserver_request_duration_seconds_sum{group="",resource="pods",subresource="",verb="POST"} 1
apiserver_request_duration_seconds_count{group="",resource="pods",subresource="",verb="POST"} 10
apiserver_watch_events_sizes_sum{group="gantry.dev",kind="RTResource",version="v1"} 1000
apiserver_watch_events_sizes_count{group="gantry.dev",kind="RTResource",version="v1"} 1
apiserver_terminated_watchers_total{resource="pods"} 0
workqueue_depth{name="x"} 3
`
	after := strings.NewReplacer(
		`verb="PUT"} 0.5`, `verb="PUT"} 0.8`, `verb="PUT"} 2`, `verb="PUT"} 4`,
		`RTResource",version="v1"} 1000`, `RTResource",version="v1"} 31000`, `RTResource",version="v1"} 1`+"\n", `RTResource",version="v1"} 3`+"\n",
		`apiserver_terminated_watchers_total{resource="pods"} 0`, `apiserver_terminated_watchers_total{resource="pods"} 2`,
	).Replace(before)
	b, err := parseAPIServerMetrics(strings.NewReader(before))
	if err != nil {
		t.Fatal(err)
	}
	a, err := parseAPIServerMetrics(strings.NewReader(after))
	if err != nil {
		t.Fatal(err)
	}
	k := &knRun{runner: &runner{opts: Options{Cases: []Case{{ModeInterval, 20}}, Controllers: []string{Gantry}}}, apiserver: map[churnKey]map[string]*metricDelta{}}
	c := Case{ModeInterval, 20}
	k.addAPIServer(Gantry, c, b, a)
	k.addAPIServer(Gantry, c, b, a) // a second iteration adds up
	got := map[string]APIServerSeries{}
	for _, s := range k.apiserverList() {
		got[s.Metric] = s
	}
	if len(got) != 3 {
		t.Fatalf("series %v, want the three that moved (pods' POST did not)", got)
	}
	if s := got["apiserver_request_duration_seconds"]; s.Count != 4 || math.Abs(s.Mean-150) > 1e-9 || s.Labels["subresource"] != "status" {
		t.Errorf("status writes %+v, want 4 of 150 ms", s)
	}
	if s := got["apiserver_watch_events_sizes"]; s.Count != 4 || math.Abs(s.Mean-15000) > 1e-9 {
		t.Errorf("watch event sizes %+v, want 4 of 15000 bytes", s)
	}
	if s := got["apiserver_terminated_watchers_total"]; s.Count != 4 || s.Mean != 0 {
		t.Errorf("terminated watchers %+v, want a count of 4", s)
	}
	k.addAPIServer(Gantry, c, nil, a)
	if n := k.apiserver[churnKey{Gantry, c}]["apiserver_terminated_watchers_total,resource=pods"].count; n != 4 {
		t.Errorf("a missing scrape changed the stats: %v", n)
	}
}
