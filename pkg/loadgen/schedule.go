package loadgen

import (
	"math/rand/v2"
	"time"

	"gantry.dev/gantry/pkg/workload"
)

// arrival is one scheduled request.
type arrival struct {
	offset time.Duration
	size   float64
	// seed seeds the request's own payload RNG, so that bodies built in
	// parallel goroutines are still reproducible.
	seed uint64
}

// schedule draws arrivals lazily, in order, so that memory does not grow
// with the number of requests. Arrival times, sizes and payload seeds come
// from separate streams: changing the size distribution does not move the
// arrivals.
type schedule struct {
	perSecond        []float64
	t                int64 // nanoseconds since the start
	arrRng, sizeRng  *rand.Rand
	seedRng          *rand.Rand
	dist             workload.Distribution
	minSize, maxSize float64
}

// Stream identifiers for the PCG generators, so that one seed gives three
// independent streams.
const (
	streamArrivals = 0x61727269 // "arri"
	streamSizes    = 0x73697a65 // "size"
	streamPayloads = 0x7061796c // "payl"
)

func newSchedule(cfg Config) *schedule {
	dist := cfg.Dist
	if dist == nil {
		dist, _ = workload.LookupDist("uniform")
	}
	return &schedule{
		perSecond: cfg.Trace.PerSecond,
		arrRng:    rand.New(rand.NewPCG(cfg.Seed, streamArrivals)),
		sizeRng:   rand.New(rand.NewPCG(cfg.Seed, streamSizes)),
		seedRng:   rand.New(rand.NewPCG(cfg.Seed, streamPayloads)),
		dist:      dist,
		minSize:   cfg.MinSize,
		maxSize:   cfg.MaxSize,
	}
}

// next returns the next arrival, or false after the trace's last second.
// Within each second arrivals are a Poisson process at that second's rate;
// the process is memoryless, so at a second boundary the draw simply
// restarts at the new rate (the simulator does the same).
func (s *schedule) next() (arrival, bool) {
	for {
		sec := s.t / int64(time.Second)
		if sec >= int64(len(s.perSecond)) {
			return arrival{}, false
		}
		end := (sec + 1) * int64(time.Second)
		if rate := s.perSecond[sec]; rate > 0 {
			gap := s.arrRng.ExpFloat64() / rate * float64(time.Second)
			if float64(s.t)+gap < float64(end) {
				s.t += int64(gap)
				return s.draw(), true
			}
		}
		s.t = end
	}
}

func (s *schedule) draw() arrival {
	size := s.dist.Sample(s.sizeRng, s.minSize, s.maxSize)
	// A distribution may land a hair outside its range through rounding;
	// the payload pool's buckets rely on the bounds.
	size = min(max(size, s.minSize), s.maxSize)
	return arrival{offset: time.Duration(s.t), size: size, seed: s.seedRng.Uint64()}
}

// end is the length of the schedule.
func (s *schedule) end() time.Duration {
	return time.Duration(len(s.perSecond)) * time.Second
}
