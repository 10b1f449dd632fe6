//go:build !gantry_local

package cli

import (
	"errors"
	"testing"

	"k8s.io/client-go/rest"
)

func TestControllerFlagErrorsAreUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"unknown queue":          {"--queue=lifo"},
		"no fifo workers":        {"--queue=fifo", "--fifo-workers=0"},
		"zero qps":               {"--kube-api-qps=0"},
		"lease timing inverted":  {"--leader-elect", "--lease-duration=2s", "--renew-deadline=5s"},
		"min above max":          {"--min-workers=30", "--max-workers=20"},
		"reserve floor above 99": {"--reserve-floor=150"},
		"reserve takes the pool": {"--min-workers=2", "--reserve-workers=2"},
		"negative critical qps":  {"--critical-kube-api-qps=-1"},
		"knative flag alone":     {"--knative-webhook-url=https://127.0.0.1:8443/mutate"},
		"webhook url not https":  {"--knative", "--knative-webhook-url=http://127.0.0.1:8443/mutate"},
		"webhook url with query": {"--knative", "--knative-webhook-url=https://127.0.0.1:8443/mutate?x=1"},
		"no certificate host":    {"--knative", "--knative-webhook-host="},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			root := newRootCmd()
			root.SetArgs(append([]string{"controller"}, args...))
			err := root.Execute()
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error (exit 2)", err)
			}
		})
	}
}

func TestPriorityLimiterFlagIsTheAblationSwitch(t *testing.T) {
	for args, plain := range map[string]bool{"": false, "--priority-limiter=false": true, "--priority-limiter": false} {
		cfg, err := controllerAppConfig(args)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if cfg.Options.PlainLimiter != plain {
			t.Errorf("%q: PlainLimiter = %v, want %v", args, cfg.Options.PlainLimiter, plain)
		}
	}
}

// The Knative side's clients get the reconcile client's limits, not
// client-go's default 5/s, and the controller's own config is untouched.
func TestKnativeClientsGetTheReconcileLimits(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	got := knativeClientConfig(cfg, 20, 30)
	if got.QPS != 20 || got.Burst != 30 || got.Host != cfg.Host {
		t.Errorf("knative client config: QPS %v, burst %d, host %q; want 20, 30 and the same host", got.QPS, got.Burst, got.Host)
	}
	if cfg.QPS != 0 || cfg.Burst != 0 {
		t.Errorf("the controller's config changed: QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
}
