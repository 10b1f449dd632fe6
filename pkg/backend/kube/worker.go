package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// work runs the API calls, one function at a time per worker. The queue
// never hands a key to two workers at once and coalesces repeated adds,
// so each function's calls are serialised and a burst of Starts costs one
// scale write.
func (b *Backend) work() {
	defer b.workers.Done()
	for {
		name, shutdown := b.queue.Get()
		if shutdown {
			return
		}
		b.process(name)
	}
}

func (b *Backend) process(name string) {
	defer b.queue.Done(name)
	err := b.sync(name)
	if err == nil || b.ctx.Err() != nil {
		b.queue.Forget(name)
		return
	}
	b.opts.Logger.Warn("kubernetes backend: retrying", "function", name, "err", err)
	b.queue.AddRateLimited(name)
}

// syncJob is what one sync must do, read under the lock.
type syncJob struct {
	w      workload
	retire []retirement
	target int32
}

// sync retires the stopped instances' pods, then writes the replica count.
// The order matters: a scale-down before the retirement would let the
// workload's controller remove some other pod.
func (b *Backend) sync(name string) error {
	job, ok := b.job(name)
	if !ok {
		return nil
	}
	if failed, err := b.retire(job); err != nil {
		b.requeueRetire(name, failed)
		return err
	}
	ctx, cancel := context.WithTimeout(b.ctx, apiTimeout)
	defer cancel()
	err := job.w.scale(ctx, name, job.target)
	switch {
	case err == nil:
		return nil
	case permanent(err):
		b.failPending(name, fmt.Errorf("scale %s to %d: %w", name, job.target, err))
		return nil
	default:
		return fmt.Errorf("scale to %d: %w", job.target, err)
	}
}

// job reads what sync must do, and reports false when it must do nothing:
// the function is gone, the backend closed, or it follows (the leader
// writes the counts and retires the pods; Lead wakes every function when
// that becomes this backend's job).
func (b *Backend) job(name string) (syncJob, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.fns[name]
	if !ok || b.closed || b.follow {
		return syncJob{}, false
	}
	return syncJob{w: b.kinds[kindOrDefault(st.decl.Kind)], retire: st.takeRetire(), target: st.target()}, true
}

// retire carries out the job's retirements and returns those that failed
// with an error worth retrying. One that can never succeed (forbidden,
// say) is logged and dropped: the count is still lowered, and the
// controller then picks the pod.
func (b *Backend) retire(job syncJob) ([]retirement, error) {
	var failed []retirement
	var errs []error
	for _, r := range job.retire {
		ctx, cancel := context.WithTimeout(b.ctx, apiTimeout)
		err := job.w.retire(ctx, r.pod, r.force)
		cancel()
		switch {
		case err == nil:
		case permanent(err):
			b.opts.Logger.Warn("kubernetes backend: cannot retire pod", "pod", r.pod, "err", err)
		default:
			failed = append(failed, r)
			errs = append(errs, fmt.Errorf("retire pod %s: %w", r.pod, err))
		}
	}
	return failed, errors.Join(errs...)
}

func (b *Backend) requeueRetire(name string, failed []retirement) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, ok := b.fns[name]; ok {
		st.requeue(failed)
	}
}

// failPending fails the pending starts of a function whose workload
// cannot be scaled, at once rather than at the ready timeout, so the
// dispatcher sees the cause.
func (b *Backend) failPending(name string, err error) {
	b.opts.Logger.Error("kubernetes backend: cannot scale", "function", name, "err", err)
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, ok := b.fns[name]; ok {
		b.out.push(st.failPending(err)...)
	}
}

// permanent reports an API error that retrying the same request cannot
// fix.
func permanent(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsUnauthorized(err)
}
