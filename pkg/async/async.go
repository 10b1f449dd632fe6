// Package async is Gantry's durable queue of asynchronous invocations, on
// NATS JetStream. The gateway's /async-function route publishes a Job and
// answers 202 only once JetStream has acknowledged the publish (the job is
// on disk); workers pull jobs, run them through the same dispatcher as
// synchronous requests (with the function's async deadline), POST the
// result to the job's callback URL, and acknowledge the job only after the
// callback was delivered or given up after a bound. Delivery is therefore
// at least once: a job whose worker died before its acknowledgement is
// delivered again, with the same X-Call-Id.
//
// By default the queue is an embedded nats-server storing its stream
// under the gateway's state folder, reached in-process (it listens on no
// port); Config.URL points at an external NATS cluster instead, where
// several gateways consume one stream.
//
// Jobs go to one subject per criticality band, and each band has its own
// durable pull consumer; workers pull the most critical band first.
package async

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

var (
	// ErrFull: the queue is at its bound (HTTP 429).
	ErrFull = errors.New("async queue full")
	// ErrTooLarge: the job does not fit one message (HTTP 413).
	ErrTooLarge = errors.New("async request too large")
	// ErrUnavailable: the queue could not take the job (HTTP 503); it is
	// not stored.
	ErrUnavailable = errors.New("async queue unavailable")
	// ErrUnconfirmed: the job was sent but no acknowledgement came (the
	// server went meanwhile): it may be stored, and run. A publish of the
	// same call ID within the stream's duplicate window stores it once.
	ErrUnconfirmed = errors.New("async queue did not confirm the job")
)

// Names on the wire. The stream and its consumers are shared by every
// gateway on one NATS (--nats-url), so they are fixed.
const (
	Stream        = "GANTRY_ASYNC"
	subjectPrefix = "gantry.async"
	consumerName  = "gantry-async-band"
)

// Bands is the number of criticality bands: criticality 0-24, 25-49,
// 50-74 and 75-99 (stack.MaxCriticality).
const Bands = 4

// Band is the criticality band of a function: higher is pulled first.
func Band(criticality int) int { return min(Bands-1, max(0, criticality/25)) }

// Defaults and bounds of Config.
const (
	DefaultMaxJobs         = 100_000
	MaxMaxJobs             = 10_000_000
	DefaultMaxBytes        = 1 << 30
	DefaultCallbackRetries = 5
	MaxCallbackRetries     = 100
	DefaultAckWait         = 30 * time.Second
	DefaultWorkers         = 64
	MaxWorkers             = 10_000
	// DefaultMaxPayload is the embedded server's largest message: NATS
	// advises against messages above 8 MiB.
	DefaultMaxPayload = 8 << 20
)

// Config configures the queue and its workers.
type Config struct {
	// URL is an external NATS server or cluster ("nats://host:4222");
	// empty runs the embedded server.
	URL string
	// StoreDir is where the embedded server keeps its stream (the state
	// folder's jetstream/); empty keeps it in a temporary folder removed
	// at Close, which survives no restart.
	StoreDir string
	// MaxJobs bounds the jobs waiting or running (past it: ErrFull);
	// MaxBytes bounds their total size.
	MaxJobs  int64
	MaxBytes int64
	// CallbackRetries bounds the retries of a callback that failed; past
	// them the job is acknowledged and counted as given up.
	CallbackRetries int
	// CallbackBackoff is the first retry's wait, doubled at each retry up
	// to MaxCallbackBackoff (default 200 ms).
	CallbackBackoff time.Duration
	// AckWait is how long a job may go without news from its worker
	// before JetStream delivers it again (a worker that died); a running
	// job reports progress every third of it.
	AckWait time.Duration
	// Workers bounds the jobs one gateway runs at once.
	Workers int
	// Client posts the callbacks (default: a client whose every attempt
	// is bounded by CallbackTimeout).
	Client *http.Client
}

// MaxCallbackBackoff bounds the wait between two callback attempts.
const MaxCallbackBackoff = 10 * time.Second

// CallbackTimeout bounds one callback attempt.
const CallbackTimeout = 10 * time.Second

// Defaults fills the fields left at zero.
func (c *Config) Defaults() {
	setIfZero(&c.MaxJobs, DefaultMaxJobs)
	setIfZero(&c.MaxBytes, DefaultMaxBytes)
	setIfZero(&c.CallbackRetries, DefaultCallbackRetries)
	setIfZero(&c.CallbackBackoff, 200*time.Millisecond)
	setIfZero(&c.AckWait, DefaultAckWait)
	setIfZero(&c.Workers, DefaultWorkers)
	if c.Client == nil {
		c.Client = &http.Client{Timeout: CallbackTimeout}
	}
}

func setIfZero[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate reports a configuration that cannot run, saying why.
func (c *Config) Validate() error {
	switch {
	case c.MaxJobs < 1 || c.MaxJobs > MaxMaxJobs:
		return fmt.Errorf("queue bound %d must be in [1, %d]", c.MaxJobs, MaxMaxJobs)
	case c.MaxBytes < 1<<20:
		return fmt.Errorf("queue byte bound %d must be at least 1 MiB", c.MaxBytes)
	case c.CallbackRetries < 0 || c.CallbackRetries > MaxCallbackRetries:
		return fmt.Errorf("callback retries %d must be in [0, %d]", c.CallbackRetries, MaxCallbackRetries)
	case c.CallbackBackoff <= 0 || c.CallbackBackoff > MaxCallbackBackoff:
		return fmt.Errorf("callback backoff %v must be in (0, %v]", c.CallbackBackoff, MaxCallbackBackoff)
	case c.AckWait < time.Second || c.AckWait > time.Hour:
		return fmt.Errorf("ack wait %v must be in [1s, 1h]", c.AckWait)
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return fmt.Errorf("workers %d must be in [1, %d]", c.Workers, MaxWorkers)
	}
	if c.URL != "" {
		if err := checkNATSURL(c.URL); err != nil {
			return err
		}
	}
	return nil
}

func checkNATSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("NATS URL %q: %v", s, err)
	}
	switch {
	case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
		return fmt.Errorf("NATS URL %q: scheme must be nats, tls, ws or wss", s)
	case u.Host == "":
		return fmt.Errorf("NATS URL %q has no host", s)
	}
	return nil
}

// CheckCallback reports whether a callback URL can be posted to: an
// absolute http or https URL.
func CheckCallback(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("callback URL %q: %v", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("callback URL %q must be an absolute http or https URL", s)
	}
	return nil
}
