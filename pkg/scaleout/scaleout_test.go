package scaleout

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/stack"
)

func TestReplicasAreTheOtherServingPods(t *testing.T) {
	yes, no := true, false
	name, port := "http", int32(8080)
	ep := func(pod, ip string, ready, serving *bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving}}
		if pod != "" {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod}
		}
		return e
	}
	s := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			ep("self", "10.0.0.1", &yes, &yes),
			ep("ready", "10.0.0.2", &yes, &yes),
			ep("draining", "10.0.0.3", &no, &yes), // terminating, still holding slots
			ep("starting", "10.0.0.4", &no, &no),
			ep("", "10.0.0.5", &yes, &yes), // no pod named
			ep("old-apiserver", "10.0.0.6", &yes, nil),
		}}
	got := replicas([]any{s, "not a slice"}, "self")
	want := map[string]string{"ready": "10.0.0.2:8080", "draining": "10.0.0.3:8080", "old-apiserver": "10.0.0.6:8080"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replicas = %v, want %v", got, want)
	}
}

// noInstances is a backend that never has any: the test is about what
// travels between replicas.
type noInstances struct{}

func (noInstances) Attach(backend.Events)                        {}
func (noInstances) Deploy(context.Context, stack.Function) error { return nil }
func (noInstances) Undeploy(context.Context, string) error       { return nil }
func (noInstances) Start(string, int)                            {}
func (noInstances) Stop(backend.Instance)                        {}
func (noInstances) Close(context.Context) error                  { return nil }

// One sync over HTTP: the follower's gateway takes the grant only with
// the replicas' credentials, and its arrival reaches the leader, which
// acknowledges it in the next grant.
func TestSyncCarriesAFollowersArrivalToTheLeader(t *testing.T) {
	f := stack.Function{Name: "f", Command: "true"}
	f.Defaults()
	s := &stack.Stack{Functions: []stack.Function{f}}
	newReplica := func() *Replica {
		r := NewReplica()
		d, err := dispatch.New(dispatch.Config{Peers: r}, noInstances{})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Load(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		return r
	}
	leader, follower := newReplica(), newReplica()
	if err := leader.Lead(); err != nil {
		t.Fatal(err)
	}
	auth := gateway.NewAuth("", "", "secret")
	srv := httptest.NewServer(gateway.New(gateway.Config{Dispatcher: follower.d, Auth: auth, Routes: follower.Routes()}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	// A request waits at the follower, which has no instance.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = follower.d.Acquire(ctx, dispatch.Request{Function: "f", Size: 1, Deadline: time.Now().Add(time.Minute)})
	}()
	for st, _ := follower.d.Function("f"); st.Queued == 0; st, _ = follower.d.Function("f") {
		time.Sleep(time.Millisecond)
	}

	for _, tc := range []struct {
		sign    func(*http.Request)
		wantAck uint64
	}{
		{func(*http.Request) {}, 0}, // refused: 401, nothing folded
		{auth.Sign, 1},
	} {
		sy := &syncer{cfg: Config{Replica: leader, Sign: tc.sign}, client: http.DefaultClient, busy: map[string]bool{}, m: newMetrics(nil)}
		if err := leader.SetPeers([]string{"gw-1"}); err != nil {
			t.Fatal(err)
		}
		err := sy.sync(context.Background(), "gw-1", addr)
		if (tc.wantAck == 0) != (err != nil) {
			t.Errorf("sync: %v", err)
		}
		g, ok := leader.GrantFor("gw-1")
		if !ok || g.Ack != tc.wantAck {
			t.Errorf("grant after sync = %+v %v, want ack %d", g, ok, tc.wantAck)
		}
	}
}

func TestRunRefusesAnIncompleteConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no client":   {Namespace: "ns", Service: "gw", Identity: "gw-0"},
		"no service":  {Namespace: "ns", Identity: "gw-0"},
		"no identity": {Namespace: "ns", Service: "gw"},
	} {
		if err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%s: Run started", name)
		}
	}
}

// Over HTTP, a replica's gateway refuses API writes to its functions with
// 409, as the layer refuses them, and a leader refuses a sync with 409.
func TestAReplicasGatewayRefusesWritesAndTheLeaderRefusesSyncs(t *testing.T) {
	r := NewReplica()
	d, err := dispatch.New(dispatch.Config{Peers: r}, noInstances{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gateway.New(gateway.Config{Dispatcher: d, Routes: r.Routes()}))
	defer srv.Close()
	post := func(path, body string) int {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deploy := `{"service": "g", "image": "any", "envProcess": "true"}`
	if code := post("/system/functions", deploy); code != http.StatusConflict {
		t.Errorf("deploy on a replica: %d, want 409", code)
	}
	if code := post(PeerSyncPath, `{"slots": {"x": -1}}`); code != http.StatusBadRequest {
		t.Errorf("a negative grant: %d, want 400", code)
	}
	if err := r.Lead(); err != nil {
		t.Fatal(err)
	}
	if code := post(PeerSyncPath, `{}`); code != http.StatusConflict {
		t.Errorf("sync to the leader: %d, want 409", code)
	}
}
