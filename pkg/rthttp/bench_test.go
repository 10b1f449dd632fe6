package rthttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkCriticalRequestBesideChurn measures what a critical request
// from a thread-locked worker waits, while churn goroutines keep the same
// process's HTTP/2 connection to the same server busy, as the controller's
// interfering reconciles do: over that shared connection (client-go's
// path) and over a Transport of its own. The server answers every request
// after the same small piece of work.
func BenchmarkCriticalRequestBesideChurn(b *testing.B) {
	for _, churners := range []int{0, 32} {
		for _, path := range []string{"shared-h2", "rthttp"} {
			b.Run(path+fmt.Sprintf("/churn-%d", churners), func(b *testing.B) {
				benchCritical(b, path, churners)
			})
		}
	}
}

func benchCritical(b *testing.B, path string, churners int) {
	payload := bytes.Repeat([]byte("p"), 2048)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := 0
		for range 2000 { // a little CPU per request, as an apiserver spends
			for _, c := range body[:64] {
				sum += int(c)
			}
		}
		w.Header().Set("X-Sum", strconv.Itoa(sum))
		_, _ = w.Write(body[:256])
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	shared := srv.Client().Transport.(*http.Transport).Clone()
	shared.ForceAttemptHTTP2 = true
	defer shared.CloseIdleConnections()
	critical := http.RoundTripper(shared)
	if path == "rthttp" {
		t := New(Options{TLS: shared.TLSClientConfig})
		defer t.Close()
		critical = t
	}
	send := func(ctx context.Context, rt http.RoundTripper) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(payload))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range churners {
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = send(ctx, shared)
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()

	lat := make([]time.Duration, 0, b.N)
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range b.N {
			start := time.Now()
			if err := send(context.Background(), critical); err != nil {
				done <- err
				return
			}
			lat = append(lat, time.Since(start))
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
