package backend

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"gantry.dev/gantry/pkg/ctxtime"
)

// Health-check bounds after an instance failed a request: checkTries
// probes, each within checkTimeout, checkGap apart. A process that is only
// slow to accept for a moment passes; one that is gone or wedged fails
// within about 3.2 s.
const (
	checkTries   = 3
	checkTimeout = time.Second
	checkGap     = 100 * time.Millisecond
)

var checkClient = &http.Client{Timeout: checkTimeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// CheckHealth is the readiness check run again on a ready instance that
// failed a request: GET HealthPath, healthy on any answer below 500, up to
// checkTries attempts. nil means healthy.
func CheckHealth(ctx context.Context, inst Instance) error {
	url := "http://" + inst.Addr + HealthPath
	for try := 1; ; try++ {
		if probe(ctx, checkClient, url) {
			return nil
		}
		if try == checkTries {
			return fmt.Errorf("instance %s: no answer below 500 on %s in %d tries", inst.ID, HealthPath, checkTries)
		}
		if err := ctxtime.Sleep(ctx, checkGap); err != nil {
			return err
		}
	}
}
