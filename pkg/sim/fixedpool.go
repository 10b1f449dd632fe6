package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
)

// PoolPoint is a fixed pool found in hindsight: its mean live containers
// (the pool, held warm over the whole run) and the SLO compliance it
// reaches on the run's own requests.
type PoolPoint struct {
	Containers float64
	Compliance float64
}

// FixedPools is the online frontier's first yardstick (docs/simulator.md,
// "The online frontier"): for each target SLO compliance, the smallest
// fixed pool that reaches it on this run's requests, known in hindsight.
// The pool holds ceil(k · busy_f) warm containers at function f, busy_f
// being f's mean busy cores, for the smallest k ≥ 1 found by bisection to
// within 0.5% of the pool (one k for the chain, so for chains it is an
// upper estimate of the best pool); queues are FIFO and unbounded. A
// target below what k = 1 reaches gets k = 1's pool. cfg's policy is
// ignored; its cold start is not (the pool is warm from the start).
func FixedPools(ctx context.Context, cfg Config, targets []float64) ([]PoolPoint, error) {
	cfg.applyDefaults()
	cfg.Custom, cfg.Policy, cfg.KeepAlive = nil, "atoll", 0 // any policy: the pool replaces it
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r, err := replay(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	memo := map[float64]PoolPoint{}
	eval := func(k float64) (PoolPoint, error) {
		if p, ok := memo[k]; ok {
			return p, nil
		}
		p, err := r.pool(ctx, k)
		memo[k] = p
		return p, err
	}
	out := make([]PoolPoint, len(targets))
	for i, t := range targets {
		if out[i], err = r.search(t, eval); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replayed holds a run's requests for the fixed pools.
type replayed struct {
	slo      int64
	arrivals []int64
	execs    [][]int64 // per function, per request
	busy     []float64 // per function, mean busy cores over the trace
}

func replay(ctx context.Context, cfg *Config) (*replayed, error) {
	r := &replayed{slo: int64(cfg.App.SLO), execs: make([][]int64, len(cfg.App.Chain)), busy: make([]float64, len(cfg.App.Chain))}
	err := realize(ctx, cfg, func(_, arrival int64, exec []int64) {
		r.arrivals = append(r.arrivals, arrival)
		for f, p := range exec {
			r.execs[f] = append(r.execs[f], p)
			r.busy[f] += float64(p)
		}
	})
	if err != nil {
		return nil, err
	}
	if len(r.arrivals) == 0 {
		return nil, ErrNoRequests
	}
	for f := range r.busy {
		r.busy[f] /= float64(cfg.Trace.Duration())
	}
	return r, nil
}

// search finds the smallest k whose pool reaches target.
func (r *replayed) search(target float64, eval func(float64) (PoolPoint, error)) (PoolPoint, error) {
	lo, hi := 1.0, 1.0
	p, err := eval(hi)
	if err != nil || p.Compliance >= target {
		return p, err
	}
	for p.Compliance < target {
		if hi > 1024 {
			return p, fmt.Errorf("%w: no fixed pool reaches %.6f", ErrInvariant, target)
		}
		lo, hi = hi, hi*2
		if p, err = eval(hi); err != nil {
			return p, err
		}
	}
	best := p
	for {
		mid := (lo + hi) / 2
		if pl, ph := r.size(lo), r.size(hi); ph-pl <= max(1, int(0.005*float64(ph))) {
			return best, nil
		}
		q, err := eval(mid)
		if err != nil {
			return q, err
		}
		if q.Compliance >= target {
			hi, best = mid, q
		} else {
			lo = mid
		}
	}
}

func (r *replayed) counts(k float64) []int {
	n := make([]int, len(r.busy))
	for f, b := range r.busy {
		n[f] = max(1, int(math.Ceil(k*b)))
	}
	return n
}

func (r *replayed) size(k float64) int {
	total := 0
	for _, n := range r.counts(k) {
		total += n
	}
	return total
}

// pool runs the requests through FIFO pools of ceil(k·busy_f) warm
// containers, function after function.
func (r *replayed) pool(ctx context.Context, k float64) (PoolPoint, error) {
	n := r.counts(k)
	rel := slices.Clone(r.arrivals)
	order := make([]int32, len(rel))
	for i := range order {
		order[i] = int32(i)
	}
	var free freeTimes
	for f, exec := range r.execs {
		if f > 0 {
			sort.SliceStable(order, func(a, b int) bool { return rel[order[a]] < rel[order[b]] })
		}
		free = append(free[:0], make([]int64, n[f])...)
		for c, i := range order {
			if c%checkEvery == 0 && ctx.Err() != nil {
				return PoolPoint{}, fmt.Errorf("sim: stopped sizing the fixed pool: %w", context.Cause(ctx))
			}
			start := max(rel[i], free[0])
			rel[i] = start + exec[i]
			free.replaceMin(rel[i])
		}
	}
	met := 0
	for i, end := range rel {
		if end-r.arrivals[i] <= r.slo {
			met++
		}
	}
	total := 0
	for _, c := range n {
		total += c
	}
	return PoolPoint{Containers: float64(total), Compliance: float64(met) / float64(len(rel))}, nil
}

// freeTimes is a min-heap of when each container of a pool frees.
type freeTimes []int64

// replaceMin replaces the earliest free time with v.
func (h freeTimes) replaceMin(v int64) {
	i := 0
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1] < h[c] {
			c++
		}
		if v <= h[c] {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = v
}
