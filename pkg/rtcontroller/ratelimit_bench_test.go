package rtcontroller

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// BenchmarkCriticalRequestBehindBacklog measures how long one critical API
// request waits for the client-side limiter when 50 low-criticality requests
// are already waiting (2000 qps, burst 1, so the backlog is 25 ms long).
// client-go's bucket serves arrivals in order; the PriorityLimiter serves the
// critical request at the next token. Reported as ns/op of the critical wait.
func BenchmarkCriticalRequestBehindBacklog(b *testing.B) {
	const qps, backlog = 2000, 50
	b.Run("clientgo", func(b *testing.B) {
		benchBacklog(b, func() flowcontrol.RateLimiter { return flowcontrol.NewTokenBucketRateLimiter(qps, 1) }, backlog, nil)
	})
	b.Run("priority", func(b *testing.B) {
		benchBacklog(b, func() flowcontrol.RateLimiter { return NewPriorityLimiter(qps, 1, nil) }, backlog,
			func(l flowcontrol.RateLimiter, n int) bool { return l.(*PriorityLimiter).entered() >= n })
	})
}

// entered counts the requests that ever had to wait.
func (l *PriorityLimiter) entered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.seq)
}

// benchBacklog queues n low-priority waiters, then times a critical Wait.
// queued reports whether n waiters have entered the line; without it (client-go's
// bucket reserves its slot on entry) a short sleep lets them all enter.
func benchBacklog(b *testing.B, mk func() flowcontrol.RateLimiter, n int, queued func(flowcontrol.RateLimiter, int) bool) {
	var total time.Duration
	for b.Loop() {
		l := mk()
		l.Accept() // empty the bucket
		var wg sync.WaitGroup
		low := WithPriority(context.Background(), 1)
		for range n {
			wg.Go(func() { _ = l.Wait(low) })
		}
		if queued != nil {
			for !queued(l, n) {
				time.Sleep(50 * time.Microsecond)
			}
		} else {
			time.Sleep(2 * time.Millisecond)
		}
		start := time.Now()
		_ = l.Wait(WithPriority(context.Background(), 99))
		total += time.Since(start)
		wg.Wait()
		l.Stop()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "critical-wait-us")
}
