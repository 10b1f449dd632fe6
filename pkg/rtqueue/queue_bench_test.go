package rtqueue

import (
	"sync"
	"testing"
)

// BenchmarkAddGetDone is the queue's own cost per item, uncontended.
func BenchmarkAddGetDone(b *testing.B) {
	q := New(Config[int]{})
	defer q.ShutDown()
	i := 0
	for b.Loop() {
		q.AddWithPriority(i%1024, i%100)
		item, _ := q.Get()
		q.Done(item)
		i++
	}
}

// BenchmarkParkedWorkerWake is the round trip to a worker parked in Get:
// the chan parker (through Go's scheduler) against the futex parker used by
// pool workers (through the kernel).
func BenchmarkParkedWorkerWake(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    func() parker
	}{{"chan", func() parker { return newChanParker() }}, {"worker", newWorkerParker}} {
		b.Run(tc.name, func(b *testing.B) {
			q := New(Config[int]{})
			ack := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				park := tc.p()
				for {
					item, _, shutdown := q.getAtLeast(0, park)
					if shutdown {
						return
					}
					q.Done(item)
					ack <- struct{}{}
				}
			}()
			for b.Loop() {
				q.AddWithPriority(1, 99)
				<-ack
			}
			q.ShutDown()
			wg.Wait()
		})
	}
}
