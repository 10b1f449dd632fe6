package experiment

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress is a thread-safe progress bar weighted by simulated work; a nil
// *progress draws nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

func newBar(w io.Writer, jobs []Job) *progress {
	if w == nil {
		return nil
	}
	var total int64
	for _, j := range jobs {
		total += j.weight()
	}
	return &progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(description(len(jobs))),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(w, "\n") }),
	)}
}

func description(n int) string {
	if n == 1 {
		return "simulating 1 run"
	}
	return fmt.Sprintf("simulating %d runs", n)
}

// add advances the bar; progressbar locks internally, so workers may call it.
func (p *progress) add(n int64) {
	if p == nil || n <= 0 {
		return
	}
	_ = p.bar.Add64(n)
}

// finish completes the bar after success, or leaves it where it stopped
// after a failure so the user sees how far the runs got.
func (p *progress) finish(ok bool) {
	if p == nil {
		return
	}
	if ok {
		_ = p.bar.Finish()
		return
	}
	_ = p.bar.Exit()
}
