package rtcontroller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// goneServer answers every request as the API server answers a write to
// an object deleted meanwhile (404 NotFound, a Status body), counting the
// status writes it gets.
func goneServer(t *testing.T) (*Controller, *atomic.Int32) {
	t.Helper()
	var statusWrites atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status") {
			statusWrites.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: `rtresources.gantry.dev "svc" not found`})
	}))
	t.Cleanup(srv.Close)
	c, err := New(Options{Config: &rest.Config{Host: srv.URL}, Engine: NewFIFOEngine(1)})
	if err != nil {
		t.Fatal(err)
	}
	return c, &statusWrites
}

// A status write to an RTResource the cache says is being deleted, is
// gone, or was replaced by a new object of the same name is not sent.
func TestNoStatusWriteToAnRTResourceBeingDeletedOrGone(t *testing.T) {
	read := testRT(1) // as the reconcile read it
	next := read.Status
	next.Replicas = 1
	deleting := read.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	replaced := read.DeepCopy()
	replaced.UID = "new-uid"
	for name, cached := range map[string]*gantryv1.RTResource{"being deleted": deleting, "gone": nil, "replaced": replaced} {
		t.Run(name, func(t *testing.T) {
			c, writes := goneServer(t)
			if cached != nil {
				if err := c.rtInformer.GetIndexer().Add(cached); err != nil {
					t.Fatal(err)
				}
			}
			_, wrote, err := c.updateStatus(context.Background(), read, next)
			if wrote || err != errGone {
				t.Fatalf("updateStatus = wrote %v, err %v; want no write and errGone", wrote, err)
			}
			if n := writes.Load(); n != 0 {
				t.Fatalf("%d status writes sent", n)
			}
		})
	}
}

// A 404 on a status write (the object went after the cache last saw it)
// ends the reconcile quietly as "gone": no error, so no retry.
func TestStatusWriteAnsweredNotFoundIsDroppedNotRetried(t *testing.T) {
	c, writes := goneServer(t)
	rt := testRT(0)
	rt.Status.ObservedGeneration = rt.Generation
	rt.Status.Replicas = 1 // its pod went: the status must say 0
	if err := c.rtInformer.GetIndexer().Add(rt); err != nil {
		t.Fatal(err)
	}
	if err := c.reconcile(context.Background(), Key{Namespace: "ns", Name: "svc"}); err != nil {
		t.Fatalf("reconcile = %v, want nil (the object is gone; a retry would meet the same 404)", err)
	}
	if n := writes.Load(); n != 1 {
		t.Fatalf("%d status writes, want the one answered 404", n)
	}
	if got := testutil.ToFloat64(c.metrics.reconciles.WithLabelValues(outcomeGone)); got != 1 {
		t.Fatalf("reconciles{outcome=gone} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(c.metrics.reconciles.WithLabelValues(outcomeError)); got != 0 {
		t.Fatalf("reconciles{outcome=error} = %v, want 0", got)
	}
}
