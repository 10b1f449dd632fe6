package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/async"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// BenchmarkAsyncAccept measures accepted async invocations per second with
// the embedded JetStream server: every 202 comes after the publish
// acknowledgement, while the gateway's workers run the jobs beside it (an
// echo instance, no callback). The target is at least 5000/s on 2 cores:
//
//	go test -run '^$' -bench AsyncAccept -benchtime 20000x -cpu 2 ./pkg/gateway
func BenchmarkAsyncAccept(b *testing.B) {
	self := instanceFunction(&testing.T{}, "echo", "echo")
	self.Concurrency, self.MaxQueue = 64, 10000
	srv, err := Start(context.Background(), ServerConfig{Addr: "127.0.0.1:0", Stack: &stack.Stack{Functions: []stack.Function{self}},
		Backend: backend.NewLocal(backend.LocalConfig{}), Dispatch: dispatch.Config{Tick: 50 * time.Millisecond},
		Async: &async.Config{StoreDir: b.TempDir(), MaxJobs: async.MaxMaxJobs}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	url := srv.URL() + "/async-function/echo"
	b.SetParallelism(32) // 32 clients per core, each waiting for its 202
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "text/plain", strings.NewReader("hello"))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Errorf("status %d, want 202", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "accepted/s")
}
