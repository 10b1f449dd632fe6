package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"gantry.dev/gantry/pkg/backend/kube"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/stack"
)

// A gateway restarted under load (drain, then a new one on the same
// address) loses no request it accepted: each gets its answer, and
// connections refused while no gateway listens are retried by the client.
// The new gateway adopts the running pods (kube.CloseKeep) instead of
// starting new ones.
func TestGatewayRestartUnderLoad(t *testing.T) {
	e := setup(t)
	e2etest.InstallCRD(t, e.dyn)
	e2etest.StartRTController(t, e.cfg, e.ns, "gantry-processnode-e2e")
	ctx := context.Background()
	f := stack.Function{Name: "echo", Command: program, Image: "example.invalid/echo:1",
		Env:         map[string]string{instanceEnv: "1", "SLEEP": "100ms"},
		Criticality: 80, MinScale: 2, MaxScale: 4, Concurrency: 1, SLO: time.Second, Timeout: 10 * time.Second}
	f.Defaults()
	start := func(addr string, onClose kube.CloseAction) *gateway.Server {
		t.Helper()
		be, err := kube.New(e.cfg, e.ns, kube.Options{Port: port, OnClose: onClose, ReadyTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := gateway.Start(ctx, gateway.ServerConfig{Addr: addr, Backend: be,
			Stack:    &stack.Stack{Functions: []stack.Function{f}},
			Dispatch: dispatch.Config{Tick: 100 * time.Millisecond, Window: time.Second, Logger: testLogger(t)},
			Gateway:  gateway.Config{Logger: testLogger(t)}})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	shutdown := func(srv *gateway.Server) {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	}
	first := start("127.0.0.1:0", kube.CloseKeep)
	addr := first.Addr()
	url := "http://" + addr + "/function/echo"
	if code, body, err := call(url, "warm"); err != nil || code != http.StatusOK {
		t.Fatalf("first request: %d %q %v", code, body, err)
	}
	var before []types.UID
	e2etest.Eventually(t, "the two minimum pods ready", func(ctx context.Context) (bool, error) {
		pods, err := e.readyPods(ctx, kube.LabelFunction+"=echo")
		before = before[:0]
		for _, p := range pods {
			before = append(before, p.UID)
		}
		return len(pods) == 2, err
	})

	var (
		answered, refused, lost atomic.Int64
		lostErrs                sync.Map
		wg                      sync.WaitGroup
	)
	stop := make(chan struct{})
	for c := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("r-%d-%d", c, i)
				for {
					code, got, err := callReplayable(url, body)
					if errors.Is(err, syscall.ECONNREFUSED) {
						refused.Add(1) // no gateway listening: never accepted
						time.Sleep(20 * time.Millisecond)
						continue
					}
					switch {
					case err != nil:
						lost.Add(1)
						lostErrs.Store(body, err.Error())
					case code == http.StatusOK && strings.HasSuffix(got, ":"+body):
						answered.Add(1)
					default:
						lost.Add(1)
						lostErrs.Store(body, fmt.Sprintf("%d %s", code, got))
					}
					break
				}
			}
		})
	}
	time.Sleep(time.Second)
	// Under load the first gateway may have scaled past the minimum, and
	// the new one claims spares in name order, so the pods to look for
	// afterwards are those running at the restart, not at the warm-up.
	atRestart, err := e.readyPods(ctx, kube.LabelFunction+"=echo")
	if err != nil {
		t.Fatal(err)
	}
	shutdown(first)
	second := start(addr, kube.CloseDelete)
	t.Cleanup(func() { shutdown(second) })
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("restart: %d requests answered, %d connection attempts refused while no gateway listened, %d lost",
		answered.Load(), refused.Load(), lost.Load())
	if lost.Load() != 0 {
		lostErrs.Range(func(k, v any) bool { t.Logf("  %s: %s", k, v); return true })
		t.Errorf("requests the gateway accepted were lost")
	}
	pods, err := e.readyPods(ctx, kube.LabelFunction+"=echo")
	if err != nil {
		t.Fatal(err)
	}
	var after, running []types.UID
	for _, p := range pods {
		after = append(after, p.UID)
	}
	for _, p := range atRestart {
		running = append(running, p.UID)
	}
	adopted := 0
	for _, uid := range after {
		if slices.Contains(running, uid) {
			adopted++
		}
	}
	// The minimum (2) must be served by pods the first gateway left
	// running: a new gateway that started its own instead would show
	// fewer.
	if adopted < len(before) {
		t.Errorf("%d of the pods running at the restart %v are ready after it (pods now %v, at the warm-up %v): the new gateway should adopt at least %d",
			adopted, running, after, before, len(before))
	}
}

// callReplayable posts body with an Idempotency-Key, as a client that may
// resend does: Go's transport then resends it when the server closed a
// kept-alive connection just as the request went out on it (the drain
// closing idle connections), a request no gateway read. A request the
// gateway read and then lost still fails.
func callReplayable(url, body string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Idempotency-Key", body)
	return readAnswer(client.Do(req))
}
