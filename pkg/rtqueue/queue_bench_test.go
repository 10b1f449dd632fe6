package rtqueue

import (
	"runtime"
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

// BenchmarkParkedWorkerWake is the round trip to a thread-locked worker
// parked in Get, which needs Go's scheduler to hand a P to its thread.
func BenchmarkParkedWorkerWake(b *testing.B) {
	q := New(Config[int]{})
	ack := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread() // as a pool worker is
		defer runtime.UnlockOSThread()
		park := newParker()
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
}
