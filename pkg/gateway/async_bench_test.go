package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	start, cpu0, inst0 := time.Now(), processCPU(), descendantsCPU(os.Getpid())
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
	// The gateway process's CPU per accepted request (the benchmark's
	// clients and the workers running the jobs included; the echo
	// instances' processes not): a figure other load on the machine does
	// not change, unlike the rate. 5000/s on 2 cores needs at most 400 µs
	// of CPU a request, all processes together.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/accepted")
	// The instances' processes (children and theirs), at clock-tick
	// resolution: with the figure above, the CPU an accepted and run
	// async request costs this machine.
	b.ReportMetric(float64((descendantsCPU(os.Getpid())-inst0).Microseconds())/float64(b.N), "instance-cpu-µs/accepted")
}

// descendantsCPU is the CPU time the live descendants of pid have used
// (/proc: utime and stime of each, in clock ticks of 10 ms), at most
// 1000 processes.
func descendantsCPU(pid int) time.Duration {
	var total time.Duration
	todo, seen := []int{pid}, 0
	for len(todo) > 0 && seen < 1000 {
		p := todo[0]
		todo = todo[1:]
		seen++
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					todo = append(todo, n)
				}
			}
		}
		if p == pid {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state is the
		// 3rd field of the line, utime the 14th, stime the 15th.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return total
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
