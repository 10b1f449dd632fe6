package loadgen

import (
	"math"
	"time"
)

// Outcome kinds. An HTTP response outside 2xx is "http_<code>", e.g. http_429.
const (
	KindOK = "ok"
	// KindClientOverload is an arrival that found MaxInFlight requests
	// already in flight; it was not sent and has no latency.
	KindClientOverload = "client_overload"
	// KindTimeout is a request that exceeded Config.Timeout.
	KindTimeout           = "timeout"
	KindConnectionRefused = "connection_refused"
	// KindConnectionReset covers a peer that reset or closed the connection
	// before answering in full.
	KindConnectionReset = "connection_reset"
	// KindCanceled is a request aborted because the run was cancelled and
	// the drain bound ran out; it has no latency.
	KindCanceled = "canceled"
	// KindPayload is a request whose body the Payload could not build; it
	// was not sent and has no latency.
	KindPayload = "payload"
	KindOther   = "other"
)

// Sample is the outcome of one scheduled request.
type Sample struct {
	// Offset is the intended send time, from the start of the run.
	Offset time.Duration
	// Size is the input size drawn for the request.
	Size float64
	// Latency runs from the intended send time to the end of the response
	// body; meaningful only when Measured.
	Latency  time.Duration
	Measured bool
	// Status is the HTTP status code, 0 when there was no response.
	Status int
	// Kind is KindOK or the error kind.
	Kind string
}

// Second summarises the requests whose intended send time fell in one second.
type Second struct {
	Sent, OK, Errors int64
	// MeanLatency and MaxLatency cover the measured requests of the second.
	MeanLatency, MaxLatency time.Duration
}

// Result is what a run measured. Requests = OK + Errors, and ErrorsByKind
// sums to Errors.
type Result struct {
	// Requests counts every arrival that came due, sent or not.
	Requests, OK, Errors int64
	ErrorsByKind         map[string]int64
	// Throughput is OK responses per second of Duration.
	Throughput float64
	SLO        time.Duration
	// SLOCompliance is the fraction of Requests answered OK within SLO; an
	// error of any kind counts against it. It is 0 when nothing was due.
	SLOCompliance float64
	// The percentiles, Max and Mean cover every measured request: OK
	// responses, HTTP errors, timeouts and connection errors, but not
	// client_overload, canceled or payload errors, which have no latency.
	P50, P90, P95, P99, P999, Max, Mean time.Duration
	// Measured counts the requests the percentiles cover.
	Measured int64
	// Start is when the schedule's clock started; Offsets count from it.
	Start time.Time
	// Duration runs from Start until the last request finished or was
	// abandoned.
	Duration time.Duration
	// Interrupted is set when the context was cancelled before the trace ended.
	Interrupted bool
	// ThroughputSeries is the OK responses completed in each second since Start.
	ThroughputSeries []int64
	// Timeline is indexed by the second of the intended send time.
	Timeline []Second
}

// Summary is the flat, JSON-ready form of a Result, in milliseconds and seconds.
type Summary struct {
	Requests      int64            `json:"requests"`
	OK            int64            `json:"ok"`
	Errors        int64            `json:"errors"`
	ErrorsByKind  map[string]int64 `json:"errors_by_kind"`
	ThroughputRPS float64          `json:"throughput_rps"`
	SLOMs         float64          `json:"slo_ms"`
	SLOCompliance float64          `json:"slo_compliance"`
	P50Ms         float64          `json:"p50_ms"`
	P90Ms         float64          `json:"p90_ms"`
	P95Ms         float64          `json:"p95_ms"`
	P99Ms         float64          `json:"p99_ms"`
	P999Ms        float64          `json:"p999_ms"`
	MaxMs         float64          `json:"max_ms"`
	MeanMs        float64          `json:"mean_ms"`
	// Measured counts the requests the latencies cover, failed ones with
	// a response or a timeout included.
	Measured  int64   `json:"measured"`
	DurationS float64 `json:"duration_s"`
}

// Summary flattens r for JSON output.
func (r *Result) Summary() Summary {
	kinds := make(map[string]int64, len(r.ErrorsByKind))
	for k, v := range r.ErrorsByKind {
		kinds[k] = v
	}
	return Summary{
		Requests: r.Requests, OK: r.OK, Errors: r.Errors, ErrorsByKind: kinds,
		ThroughputRPS: round3(r.Throughput), SLOMs: ms(r.SLO), SLOCompliance: r.SLOCompliance,
		P50Ms: ms(r.P50), P90Ms: ms(r.P90), P95Ms: ms(r.P95), P99Ms: ms(r.P99), P999Ms: ms(r.P999),
		MaxMs: ms(r.Max), MeanMs: ms(r.Mean), Measured: r.Measured, DurationS: round3(r.Duration.Seconds()),
	}
}

// ms converts to milliseconds with microsecond resolution, which is all a
// network latency measurement can claim.
func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
