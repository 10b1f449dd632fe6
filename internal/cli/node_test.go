//go:build !gantry_local

package cli

import (
	"errors"
	"slices"
	"testing"
)

func TestNodeFlagsBuildTheConfig(t *testing.T) {
	f := &nodeFlags{name: "n1", maxPods: 20, programs: []string{"echo=/bin/echo"},
		images: []string{"registry.example/fn:1=gantry fn sentiment"}}
	cfg, err := f.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "n1" || cfg.MaxPods != 20 || cfg.Programs["echo"] != "/bin/echo" || cfg.Programs["gantry"] == "" {
		t.Errorf("config %+v", cfg)
	}
	if got := cfg.Images["registry.example/fn:1"]; !slices.Equal(got, []string{"gantry", "fn", "sentiment"}) {
		t.Errorf("image map %v", got)
	}
}

func TestNodeBadFlagsAreUsageErrors(t *testing.T) {
	for _, f := range []nodeFlags{
		{maxPods: 1},
		{name: "n", maxPods: 0},
		{name: "n", maxPods: 1, programs: []string{"nopath"}},
		{name: "n", maxPods: 1, images: []string{"img="}},
		{name: "n", maxPods: 1, certFile: "c.pem"},
	} {
		if _, err := f.config(); !errors.As(err, new(usageError)) {
			t.Errorf("config(%+v) = %v, want a usage error", f, err)
		}
	}
}
