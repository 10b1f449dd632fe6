package rtcontroller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
)

type countingRT struct{ n int }

func (c *countingRT) RoundTrip(*http.Request) (*http.Response, error) {
	c.n++
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

func TestCriticalRouterSendsOnlyCriticalNonWatchRequestsOverTheThread(t *testing.T) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	thread, shared := &countingRT{}, &countingRT{}
	r := newCriticalRouter(5, thread, shared, m)
	cases := []struct {
		ctx    context.Context
		url    string
		thread bool
	}{
		{context.Background(), "https://h/api/v1/namespaces/a/pods", false},                  // untagged
		{WithPriority(context.Background(), 0), "https://h/api/v1/namespaces/a/pods", false}, // background
		{WithPriority(context.Background(), 4), "https://h/api/v1/namespaces/a/pods", false}, // below the floor
		{WithPriority(context.Background(), 5), "https://h/api/v1/namespaces/a/pods", true},
		{WithPriority(context.Background(), 99), "https://h/apis/gantry.dev/v1alpha1/namespaces/a/rtresources/x/status", true},
		{WithPriority(context.Background(), 99), "https://h/api/v1/pods?watch=true", false}, // streams stay on HTTP/2
	}
	wantThread := 0
	for i, c := range cases {
		before := thread.n
		req, _ := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url, nil)
		if _, err := r.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if got := thread.n > before; got != c.thread {
			t.Errorf("case %d (%s): over the thread = %v, want %v", i, c.url, got, c.thread)
		}
		if c.thread {
			wantThread++
		}
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("thread")); int(got) != wantThread {
		t.Errorf("thread requests counted %v, want %d", got, wantThread)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("shared")); int(got) != len(cases)-wantThread {
		t.Errorf("shared requests counted %v, want %d", got, len(cases)-wantThread)
	}
}

func TestThreadTransportStandsAsideForProxiesAndCustomTransports(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	ok := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if _, err := threadTransport(ok); err != nil {
		t.Fatalf("plain config: %v", err)
	}
	bad := map[string]*rest.Config{
		"custom transport": {Host: srv.URL, Transport: http.DefaultTransport},
		"proxy": {Host: srv.URL, Proxy: func(*http.Request) (*url.URL, error) {
			return url.Parse("http://proxy:3128")
		}},
	}
	for name, cfg := range bad {
		if _, err := threadTransport(cfg); err == nil {
			t.Errorf("%s: no error; critical requests would bypass it", name)
		}
	}
	// Host without a scheme, as kubeconfigs sometimes have.
	if _, err := threadTransport(&rest.Config{Host: strings.TrimPrefix(srv.URL, "https://"), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}); err != nil {
		t.Errorf("host without scheme: %v", err)
	}
}

// The typed clients speak protobuf, as kube-controller-manager's do; a
// content type the caller chose stays, and the caller's config is not
// changed.
func TestKubeClientsSpeakProtobufUnlessTold(t *testing.T) {
	in := &rest.Config{Host: "https://127.0.0.1:1"}
	out := protobuf(in)
	if out.ContentType != "application/vnd.kubernetes.protobuf" || !strings.HasPrefix(out.AcceptContentTypes, "application/vnd.kubernetes.protobuf,") {
		t.Errorf("content type %q, accept %q: want protobuf first", out.ContentType, out.AcceptContentTypes)
	}
	if in.ContentType != "" {
		t.Errorf("the caller's config changed: %q", in.ContentType)
	}
	json := &rest.Config{ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	if got := protobuf(json).ContentType; got != "application/json" {
		t.Errorf("a chosen content type became %q", got)
	}
}
