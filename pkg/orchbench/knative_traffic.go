package orchbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// requestBody is what every request sends to the Services' function.
const requestBody = "The benchmark sends this sentence; the function scores its sentiment."

// traffic is one iteration's requests: an open loop of rate requests/s to
// each host, in round robin (host i's ticks are offset by i/N of a
// period), through Gantry's Knative ingress.
type traffic struct {
	client  *http.Client
	url     string
	timeout time.Duration

	mu      sync.Mutex
	lat     []float64 // successful requests, ms
	sent    int
	ok      int
	failed  map[string]int // by reason: the status, or the error's kind
	example string         // one failure, verbatim, for the log
}

func newTraffic(ingress string, timeout time.Duration) *traffic {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	return &traffic{client: &http.Client{Transport: tr}, url: "http://" + ingress + "/", timeout: timeout, failed: map[string]int{}}
}

// run sends until ictx ends and returns once every request sent has
// ended: answered, timed out, or cut by ctx (an interrupt).
func (t *traffic) run(ctx, ictx context.Context, hosts []string, rate float64) {
	period := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	for i, host := range hosts {
		offset := period * time.Duration(i) / time.Duration(len(hosts))
		wg.Go(func() {
			var reqs sync.WaitGroup
			defer reqs.Wait()
			timer := time.NewTimer(offset)
			defer timer.Stop()
			next := time.Now().Add(offset)
			for {
				select {
				case <-ictx.Done():
					return
				case <-timer.C:
				}
				reqs.Go(func() { t.send(ctx, host) })
				// Open loop: the schedule does not wait for answers.
				next = next.Add(period)
				timer.Reset(time.Until(next))
			}
		})
	}
	wg.Wait()
}

func (t *traffic) send(ctx context.Context, host string) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(requestBody))
	if err != nil {
		t.fail("request", err.Error())
		return
	}
	req.Host = host
	req.Header.Set("Content-Type", "text/plain")
	start := time.Now()
	t.mu.Lock()
	t.sent++
	t.mu.Unlock()
	resp, err := t.client.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			t.fail("timeout", err.Error())
		default:
			t.fail("error", err.Error())
		}
		return
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	d := time.Since(start)
	switch {
	case err != nil:
		t.fail("error", err.Error())
	case resp.StatusCode != http.StatusOK:
		t.fail(fmt.Sprint(resp.StatusCode), host+": "+resp.Status)
	default:
		t.mu.Lock()
		t.ok++
		t.lat = append(t.lat, float64(d)/float64(time.Millisecond))
		t.mu.Unlock()
	}
}

func (t *traffic) fail(reason, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed[reason]++
	if t.example == "" {
		t.example = detail
	}
}

// snapshot returns the counts so far.
func (t *traffic) snapshot() (sent, ok, failed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.failed {
		failed += n
	}
	return t.sent, t.ok, failed
}

func (t *traffic) close() { t.client.CloseIdleConnections() }
