package localcluster

import (
	"testing"
	"time"
)

// BenchmarkStart measures start-to-ready of the full plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok with 3 nodes)
// with cached binaries: Start's return, with every node schedulable. The
// target is 15 s. Stop is timed separately.
func BenchmarkStart(b *testing.B) {
	requireBinaries(b)
	var stop time.Duration
	for b.Loop() {
		c, err := Start(b.Context(), Options{Nodes: 3, Scheduler: true, ControllerManager: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		t0 := time.Now()
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
		stop += time.Since(t0)
		b.StartTimer()
	}
	b.ReportMetric(stop.Seconds()/float64(b.N), "s-stop/op")
}
