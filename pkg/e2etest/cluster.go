package e2etest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/config/crd"
	"gantry.dev/gantry/pkg/rtcontroller"
)

var crdOnce struct {
	sync.Once
	err error
}

// InstallCRD applies the generated RTResource CRD that `make deploy`
// ships, once per test binary: its tests share one cluster.
func InstallCRD(t testing.TB, dyn dynamic.Interface) {
	t.Helper()
	crdOnce.Do(func() { crdOnce.err = crd.Install(context.Background(), dyn, nil) })
	if crdOnce.err != nil {
		t.Fatalf("install CRD: %v", crdOnce.err)
	}
}

// StartRTController runs the RTResource controller in-process for
// namespace ns until the test ends, so an RTResource's replicas become
// pods. component names it in the Events it writes.
func StartRTController(t testing.TB, cfg *rest.Config, ns, component string) {
	t.Helper()
	c, err := rtcontroller.New(rtcontroller.Options{Config: cfg, Namespace: ns,
		Engine: rtcontroller.NewFIFOEngine(2), Component: component})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("controller: %v", err)
		}
	})
}
