//go:build !linux

package rtqueue

func newWorkerParker() parker { return newChanParker() }
