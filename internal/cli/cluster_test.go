//go:build !gantry_local

package cli

import "testing"

// Bad --knative flags are usage errors before anything starts.
func TestClusterUpKnativeBadFlagsAreUsageErrors(t *testing.T) {
	t.Setenv("GANTRY_CACHE", t.TempDir())
	cases := [][]string{
		{"--knative-ingress", "127.0.0.1:8080"},           // without --knative
		{"--knative", "--knative-ingress", "10.1.2.3:80"}, // not loopback
		{"--knative", "--knative-ingress", "localhost:80"},
		{"--knative", "--knative-ingress", "127.0.0.1"},
		{"--knative", "--knative-ingress", "127.0.0.1:0"},
		{"--knative", "--knative-ingress", "127.0.0.1:70000"},
		{"--knative-ingress-https", "127.0.0.1:8443"},                                                     // without --knative
		{"--knative", "--knative-ingress-https", "10.1.2.3:443"},                                          // not loopback
		{"--knative", "--knative-ingress-https", "127.0.0.1:0"},                                           // no port
		{"--knative", "--knative-ingress", "127.0.0.1:8443", "--knative-ingress-https", "127.0.0.1:8443"}, // the same
		{"--knative", "--knative-domain", "Not_A_Domain"},
		{"--knative", "--knative-domain", ""},
	}
	assertUsageErrors(t, []string{"cluster", "up"}, cases)
}
