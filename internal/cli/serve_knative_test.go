//go:build !gantry_local

package cli

import (
	"errors"
	"testing"
)

func TestServeKnativeIngressFlagErrorsAreUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"addr without the ingress":     {"serve", "--knative-ingress-addr=127.0.0.1:9000"},
		"timeout without the ingress":  {"serve", "--knative-ingress-timeout=1m"},
		"addr without a port":          {"serve", "--knative-ingress", "--knative-ingress-addr=127.0.0.1"},
		"local addr without a port":    {"serve", "--knative-ingress", "--knative-ingress-local-addr=localhost"},
		"loopback private LB":          {"serve", "--knative-ingress", "--knative-ingress-local-lb=127.0.0.1"},
		"link-local public LB":         {"serve", "--knative-ingress", "--knative-ingress-public-lb=169.254.1.1"},
		"LB neither IP nor name":       {"serve", "--knative-ingress", "--knative-ingress-public-lb=not a name"},
		"zero timeout":                 {"serve", "--knative-ingress", "--knative-ingress-timeout=0s"},
		"timeout past the bound":       {"serve", "--knative-ingress", "--knative-ingress-timeout=2h"},
		"namespace with the ingress":   {"serve", "--knative-ingress", "--namespace=fns"},
		"kubeconfig without a backend": {"serve", "--kubeconfig=/nonexistent"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			root := newRootCmd()
			root.SetArgs(args)
			err := root.Execute()
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error (exit 2)", err)
			}
		})
	}
}
