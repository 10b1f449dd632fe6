package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/liverun"
)

func TestServeAndUpFlagErrorsAreUsageErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"serve empty basic auth":   {"serve", "--addr=127.0.0.1:0", "--basic-auth-file", empty},
		"serve empty token":        {"serve", "--addr=127.0.0.1:0", "--token-file", empty},
		"serve missing auth file":  {"serve", "--addr=127.0.0.1:0", "--basic-auth-file", empty + ".missing"},
		"serve zero start timeout": {"serve", "--start-timeout=0s"},
		"serve start delay on k8s": {"serve", "--backend=kubernetes", "--start-delay=1s"},
		"serve unknown policy":     {"serve", "--policy=magic"},
		"serve negative cap":       {"serve", "--capacity=-1"},
		"serve tick too short":     {"serve", "--tick=1ms"},
		"serve window too short":   {"serve", "--window=10ms"},
		"serve huge body":          {"serve", "--max-body=9999999999999"},
		"serve zero drain":         {"serve", "--drain-timeout=0s"},
		"serve negative delay":     {"serve", "--start-delay=-1s"},
		"serve selector on local":  {"serve", "--node-selector=type=process"},
		"serve selector bad key":   {"serve", "--backend=kubernetes", "--node-selector=bad key=x"},
		"serve selector bad value": {"serve", "--backend=kubernetes", "--node-selector=type=not/ok"},
		"serve peers on local":     {"serve", "--peers=gateway", "--pod-name=gw-0"},
		"serve peers no pod name":  {"serve", "--backend=kubernetes", "--peers=gateway", "--pod-name="},
		"serve peers bad service":  {"serve", "--backend=kubernetes", "--peers=Not_A_Service", "--pod-name=gw-0"},
		"up unknown policy":        {"up", "--policy=magic"},
		"up unknown app":           {"up", "--app=nope"},
		"up unknown trace":         {"up", "--trace=nope"},
		"up unknown dist":          {"up", "--dist=nope"},
		"up rate too high":         {"up", "--rate=1e9"},
		"up rate zero":             {"up", "--rate=0"},
		"up duration too long":     {"up", "--duration=100000h"},
		"up negative capacity":     {"up", "--capacity=-3"},
		"up slo factor zero":       {"up", "--slo-factor=0"},
		"up slo factor NaN":        {"up", "--slo-factor=NaN"},
		"up idle timeout zero":     {"up", "--idle-timeout=0s"},
		"up out not writable":      {"up", "--out=/proc/gantry-up-test"},
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

func TestServeRefusesAMalformedStackNamingFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stack.yml")
	if err := os.WriteFile(path, []byte("functions:\n  f:\n    fprocess: x\n    criticality: 400\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	root.SetArgs([]string{"serve", "--addr", "127.0.0.1:0", "--stack", path})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), path+":2:") || !strings.Contains(err.Error(), "criticality") {
		t.Fatalf("got %v", err)
	}
}

// A zero --warmup means none, not liverun's default of 20 s.
func TestUpZeroWarmupMeansNone(t *testing.T) {
	cmd := newUpCmd()
	if err := cmd.ParseFlags([]string{"--warmup=0s"}); err != nil {
		t.Fatal(err)
	}
	cfg := liverun.UpConfig{Policies: []string{"gantry"}, App: "sentiment-analysis", Trace: "twitter", Dist: "uniform",
		Functions: liverun.FunctionsReplay, Rate: 1, Duration: time.Second}
	if err := validateUp(cmd, &cfg, ""); err != nil {
		t.Fatal(err)
	}
	if cfg.Warmup >= 0 {
		t.Fatalf("warm-up %v, want none (negative)", cfg.Warmup)
	}
}

// A state folder's functions stay on the backend that deployed them: a
// Kubernetes gateway on a local gateway's folder (the default folder is
// named after the address alone) is refused, naming them, before it
// touches a cluster; a folder without functions changes hands.
func TestServeRefusesAnotherBackendsStateFolder(t *testing.T) {
	held := t.TempDir()
	if err := os.MkdirAll(filepath.Join(held, "functions"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"backend": "local\n", "functions/echo.json": "{}"} {
		if err := os.WriteFile(filepath.Join(held, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	serve := func(dir string) error {
		root := newRootCmd()
		root.SetArgs([]string{"serve", "--addr", "127.0.0.1:0", "--backend", "kubernetes", "--kubeconfig", missing, "--state-dir", dir})
		return root.Execute()
	}
	err := serve(held)
	if err == nil || !strings.Contains(err.Error(), "--backend local deployed (echo)") || !strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("kubernetes gateway on a local gateway's functions: %v, want them named and --state-dir suggested", err)
	}
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "backend"), []byte("local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err = serve(empty); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("kubernetes gateway on an empty folder: %v, want it to get as far as the kubeconfig", err)
	}
	if data, _ := os.ReadFile(filepath.Join(empty, "backend")); string(data) != "kubernetes\n" {
		t.Errorf("the empty folder's backend is %q, want kubernetes", data)
	}
}
