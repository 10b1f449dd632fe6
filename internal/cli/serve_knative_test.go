//go:build !gantry_local

package cli

import (
	"errors"
	"testing"
)

func TestServeKnativeIngressFlagErrorsAreUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"addr without the ingress":       {"serve", "--knative-ingress-addr=127.0.0.1:9000"},
		"timeout without the ingress":    {"serve", "--knative-ingress-timeout=1m"},
		"addr without a port":            {"serve", "--knative-ingress", "--knative-ingress-addr=127.0.0.1"},
		"local addr without a port":      {"serve", "--knative-ingress", "--knative-ingress-local-addr=localhost"},
		"loopback private LB":            {"serve", "--knative-ingress", "--knative-ingress-local-lb=127.0.0.1"},
		"link-local public LB":           {"serve", "--knative-ingress", "--knative-ingress-public-lb=169.254.1.1"},
		"LB neither IP nor name":         {"serve", "--knative-ingress", "--knative-ingress-public-lb=not a name"},
		"https addr without the ingress": {"serve", "--knative-ingress-https-addr=127.0.0.1:8443"},
		"https addr without a port":      {"serve", "--knative-ingress", "--knative-ingress-https-addr=127.0.0.1"},
		"https port without https addr":  {"serve", "--knative-ingress", "--knative-ingress-https-port=443"},
		"https port out of range":        {"serve", "--knative-ingress", "--knative-ingress-https-addr=127.0.0.1:0", "--knative-ingress-https-port=70000"},
		"zero timeout":                   {"serve", "--knative-ingress", "--knative-ingress-timeout=0s"},
		"timeout past the bound":         {"serve", "--knative-ingress", "--knative-ingress-timeout=2h"},
		"namespace with the ingress":     {"serve", "--knative-ingress", "--namespace=fns"},
		"kubeconfig without a backend":   {"serve", "--kubeconfig=/nonexistent"},
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
