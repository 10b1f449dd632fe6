package sim

// keyedSource is a rand.Source whose stream is set afresh for every
// (request, function) pair: a request's execution time and output size at
// a function are then the same whatever order a policy runs requests in,
// so every policy of a condition faces exactly the same work, and the
// clairvoyant bound (pkg/bound) can be computed from the requests alone.
// It is SplitMix64, seeded by mixing the run's seed with the key.
type keyedSource struct{ s uint64 }

// Streams of keyedSource.
const (
	streamExec   = 3
	streamOutput = 4
)

func (k *keyedSource) reset(seed uint64, id int64, fn int32, stream uint64) {
	k.s = mix64(seed ^ mix64(uint64(id)<<16^uint64(fn)<<4^stream))
}

func (k *keyedSource) Uint64() uint64 {
	k.s += 0x9e3779b97f4a7c15
	return mix64(k.s)
}

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
