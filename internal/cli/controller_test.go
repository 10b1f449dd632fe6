package cli

import (
	"errors"
	"testing"
)

func TestControllerFlagErrorsAreUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"unknown queue":         {"--queue=lifo"},
		"no fifo workers":       {"--queue=fifo", "--fifo-workers=0"},
		"zero qps":              {"--kube-api-qps=0"},
		"lease timing inverted": {"--leader-elect", "--lease-duration=2s", "--renew-deadline=5s"},
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
