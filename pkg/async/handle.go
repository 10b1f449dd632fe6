package async

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gantry.dev/gantry/pkg/callid"
)

// Headers of a callback, as OpenFaaS's queue worker sends them (besides
// X-Call-Id and X-Duration-Seconds).
const (
	StatusHeader   = "X-Function-Status"
	FunctionHeader = "X-Function-Name"
	DurationHeader = "X-Duration-Seconds"
)

// handle runs one job to its end: acknowledged once its callback was
// delivered or given up, handed back to the queue when the gateway could
// not run it now or is stopping.
func (w *Workers) handle(msg jetstream.Msg) {
	j, err := decode(msg.Subject(), msg.Headers(), msg.Data())
	if err != nil {
		// A message no gateway can read never will be: dropping it is
		// the only way on, and it is logged and counted.
		w.log.Error("async: dropping an unreadable job", "err", err)
		w.m.dropped.Inc()
		_ = msg.Term()
		return
	}
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 1 {
		w.m.redelivered.Inc()
		w.log.Info("async: job delivered again", "call_id", j.CallID, "function", j.Function, "delivery", md.NumDelivered)
	}
	stopBeat := w.heartbeat(msg)
	defer stopBeat()
	res := w.inv.Invoke(w.runCtx, j)
	if res.Retry || w.runCtx.Err() != nil {
		w.requeue(msg, j, "the gateway could not run it now")
		return
	}
	w.m.completed.WithLabelValues(strconv.Itoa(res.Status)).Inc()
	if j.CallbackURL != "" && !w.callback(j, res) {
		w.requeue(msg, j, "stopping while its callback was retried")
		return
	}
	if err := msg.Ack(); err != nil {
		// The job will be delivered again after AckWait: a duplicate,
		// recognisable by its call ID.
		w.log.Warn("async: acknowledging a job", "call_id", j.CallID, "err", err)
	}
}

// redacted is a callback URL fit for a log: a password in it is
// replaced, as net/http's own errors replace it.
func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// requeueDelay is how long a job handed back waits before its next
// delivery.
const requeueDelay = time.Second

func (w *Workers) requeue(msg jetstream.Msg, j *Job, why string) {
	w.m.requeued.Inc()
	w.log.Info("async: job back to the queue", "call_id", j.CallID, "function", j.Function, "why", why)
	if err := msg.NakWithDelay(requeueDelay); err != nil {
		w.log.Warn("async: handing a job back", "call_id", j.CallID, "err", err)
	}
}

// heartbeat tells JetStream the job is still being worked on every third
// of AckWait, so a long execution or callback retry is not delivered
// again beside itself. The returned function stops it.
func (w *Workers) heartbeat(msg jetstream.Msg) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(w.q.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// callback POSTs the result to the job's callback URL, retrying with
// exponential backoff up to Config.CallbackRetries times. It reports
// false only when the workers are stopping before the callback was
// delivered or given up (the job then goes back to the queue).
func (w *Workers) callback(j *Job, res Result) bool {
	wait := w.q.cfg.CallbackBackoff
	for attempt := 0; ; attempt++ {
		err := w.post(j, res)
		if err == nil {
			w.m.callbacks.WithLabelValues("delivered").Inc()
			return true
		}
		final := attempt >= w.q.cfg.CallbackRetries
		if re, ok := err.(*refused); ok && re.final {
			final = true
		}
		if final {
			w.m.callbacks.WithLabelValues("given_up").Inc()
			w.log.Warn("async: callback given up", "call_id", j.CallID, "function", j.Function,
				"url", redacted(j.CallbackURL), "attempts", attempt+1, "err", err)
			return true
		}
		w.m.callbacks.WithLabelValues("retried").Inc()
		w.log.Info("async: callback failed, retrying", "call_id", j.CallID, "url", redacted(j.CallbackURL), "in", wait, "err", err)
		select {
		case <-w.runCtx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, MaxCallbackBackoff)
	}
}

// refused is a callback the receiver answered with an error; final when
// retrying cannot help (a 4xx other than 408 and 429).
type refused struct {
	status int
	final  bool
	err    error
}

func (r *refused) Error() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("callback answered %d", r.status)
}

// post makes one callback attempt.
func (w *Workers) post(j *Job, res Result) error {
	ctx, cancel := context.WithTimeout(w.runCtx, CallbackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.CallbackURL, bytes.NewReader(res.Body))
	if err != nil {
		return &refused{final: true, err: err}
	}
	if ct := res.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set(callid.Header, j.CallID)
	req.Header.Set(StatusHeader, strconv.Itoa(res.Status))
	req.Header.Set(FunctionHeader, j.Function)
	req.Header.Set(DurationHeader, strconv.FormatFloat(res.Took.Seconds(), 'f', 6, 64))
	resp, err := w.q.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 300 {
		return nil
	}
	s := resp.StatusCode
	return &refused{status: s, final: s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests}
}
