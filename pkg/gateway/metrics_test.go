package gateway

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Counters bound once per name count every request under many goroutines,
// and requests for names nobody deployed share one series instead of
// adding one per name.
func TestMetricsCountConcurrentRequestsAndBoundUnknownNames(t *testing.T) {
	f := plainFunction("f")
	f.Concurrency, f.MaxQueue = 8, 10000
	g, _ := inprocGateway(t, f)
	const workers, each = 16, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec := httptest.NewRecorder()
				g.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/function/f", bytes.NewReader([]byte("x"))))
				if rec.Code != http.StatusOK {
					t.Errorf("HTTP %d %s", rec.Code, rec.Body)
				}
				rec = httptest.NewRecorder()
				g.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, fmt.Sprintf("/function/nope-%d-%d", w, i), nil))
				if rec.Code != http.StatusNotFound {
					t.Errorf("unknown name: HTTP %d", rec.Code)
				}
			}
		}()
	}
	wg.Wait()
	m := g.metrics
	if n := testutil.ToFloat64(m.invocations.WithLabelValues("f.openfaas-fn", "200")); n != workers*each {
		t.Fatalf("invocations of f with 200: %v, want %d", n, workers*each)
	}
	if n := testutil.ToFloat64(m.outcomes.WithLabelValues(unknownName, "not_found")); n != workers*each {
		t.Fatalf("not_found under %q: %v, want %d", unknownName, n, workers*each)
	}
	if n := testutil.CollectAndCount(m.outcomes); n != 1 {
		t.Fatalf("%d failure series, want the one for unknown names", n)
	}
	out, err := testutil.CollectAndLint(m.outcomes)
	if err != nil || len(out) != 0 {
		t.Fatalf("lint: %v %v", out, err)
	}
	// The bound itself: past maxBound names, series are still counted but
	// not kept bound.
	for i := range maxBound + 10 {
		m.forName(fmt.Sprint("n", i))
	}
	if n := m.nBound.Load(); n > maxBound {
		t.Fatalf("%d names kept bound, more than %d", n, maxBound)
	}
	if !strings.Contains(fmt.Sprint(m.forName("f.openfaas-fn").code(200).invocations.Desc()), "gateway_function_invocation_total") {
		t.Fatal("f's bound series is not the invocation counter")
	}
}
