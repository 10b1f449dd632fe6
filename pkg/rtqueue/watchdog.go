package rtqueue

// The watchdog's sizing rule, kept apart from the goroutines that apply it
// so it can be checked as plain arithmetic. It governs general workers
// only; reserve workers are a fixed count outside it. Min and Max bound the
// whole pool, reserve included.

// census is the general workers' state at one moment.
type census struct {
	idle, busy int
	reserve    int
}

func (c census) total() int { return c.idle + c.busy + c.reserve }

// shouldGrow: fewer than IdleThreshold general workers are idle and the
// pool is below Max, so the next burst would find no free worker.
func shouldGrow(c census, cfg PoolConfig) bool {
	return c.idle < cfg.IdleThreshold && c.total() < cfg.Max
}

// shouldRetire is asked by a worker that has just become idle (and is
// counted in c.idle): it leaves while more than IdleThreshold general
// workers are idle and the pool is above Min, as the reference does.
func shouldRetire(c census, cfg PoolConfig) bool {
	return c.idle > cfg.IdleThreshold && c.total() > cfg.Min
}
