package dispatch

// An instance that fails a request is quarantined rather than stopped: a
// refused or reset connection may be the instance's fault or the
// network's, so it takes no new request until its health check says which.

// check runs an instance's health check off the lock and applies the
// verdict.
func (d *Dispatcher) check(in *instance) {
	defer d.checks.Done()
	err := d.cfg.Check(d.ctx, in.Instance)
	d.mu.Lock()
	defer d.mu.Unlock()
	in.suspect = false
	if in.gone || d.closed {
		return
	}
	now := d.cfg.Now()
	if err != nil {
		d.cfg.Logger.Warn("instance failed its health check: replacing it", "instance", in.ID, "err", err)
		in.fn.stats.Crashes++
		d.lockedReplace(in, now)
		return
	}
	if d.lockedDrained(in) {
		d.lockedStop(in, now)
		d.lockedGrant(now)
		return
	}
	d.lockedFeed(in, now)
}

// lockedQuarantine takes a failed instance out of rotation and checks its
// health off the lock, once however many of its requests failed.
func (d *Dispatcher) lockedQuarantine(in *instance) {
	if in.suspect || d.closed {
		return
	}
	in.suspect = true
	in.fn.stats.Checks++
	d.checks.Add(1)
	go d.check(in)
}
