package processnode

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// notReadyTwice answers 503 to its first two requests, then 200, as a
// queue-proxy whose user container is not listening yet.
func notReadyTwice(t *testing.T) (*httptest.Server, *atomic.Int32, probeTarget, *corev1.Probe) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	probe := &corev1.Probe{PeriodSeconds: 3600, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt(p)}}}
	return srv, &n, probeTarget{ip: host}, probe
}

// A readiness probe that is not passing runs again after the retry, not
// after its period (an hour here): the pod gets ready once the program
// answers.
func TestUnreadyProbeRetriesBeforeItsPeriod(t *testing.T) {
	_, n, target, probe := notReadyTwice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // generous: a loaded machine
	defer cancel()
	ready := false
	watchProbe(ctx, probe, target, func(passing bool, _ error) bool {
		ready = passing
		return !passing
	}, 10*time.Millisecond)
	if !ready || n.Load() != 3 {
		t.Errorf("ready %v after %d probes; want ready at the third", ready, n.Load())
	}
}

// Without a retry (liveness, startup) the probe keeps its period.
func TestProbeWithoutRetryWaitsForItsPeriod(t *testing.T) {
	_, n, target, probe := notReadyTwice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	watchProbe(ctx, probe, target, func(bool, error) bool { return true }, 0)
	if got := n.Load(); got != 1 {
		t.Errorf("%d probes within 300 ms of an hourly probe, want 1", got)
	}
}
