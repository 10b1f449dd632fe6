package cli

import (
	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/async"
)

// asyncFlags are serve's settings of the async queue (pkg/async).
type asyncFlags struct {
	cfg async.Config
}

func (f *asyncFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.cfg.URL, "nats-url", "", "NATS server or cluster holding the async queue (nats://HOST:PORT); several gateways may consume one (default: an embedded server storing under the state folder's jetstream/)")
	fs.Int64Var(&f.cfg.MaxJobs, "async-queue", async.DefaultMaxJobs, "most async invocations waiting or running (429 past it)")
	fs.IntVar(&f.cfg.CallbackRetries, "async-callback-retries", async.DefaultCallbackRetries, "retries of a failed callback, with exponential backoff, before it is given up (counted in gantry_async_callbacks_total{outcome=\"given_up\"})")
	fs.IntVar(&f.cfg.Workers, "async-workers", async.DefaultWorkers, "most async invocations this gateway runs at once")
	fs.DurationVar(&f.cfg.AckWait, "async-ack-wait", async.DefaultAckWait, "how long an async invocation may go without news from its gateway before it is delivered again (a gateway that died)")
}

func (f *asyncFlags) validate() error {
	c := f.cfg
	// The queue's configuration reads 0 as "the default": written on the
	// command line it would be replaced unseen (--async-callback-retries
	// 0 retried 5 times).
	for _, z := range []struct {
		flag string
		zero bool
		def  any
	}{{"--async-queue", c.MaxJobs == 0, async.DefaultMaxJobs}, {"--async-callback-retries", c.CallbackRetries == 0, async.DefaultCallbackRetries},
		{"--async-workers", c.Workers == 0, async.DefaultWorkers}, {"--async-ack-wait", c.AckWait == 0, async.DefaultAckWait}} {
		if z.zero {
			return usagef("%s 0 is not supported: at least 1 (the default is %v)", z.flag, z.def)
		}
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return usagef("async: %v", err)
	}
	return nil
}

// config is the queue's configuration.
func (f *asyncFlags) config() *async.Config {
	c := f.cfg
	return &c
}
