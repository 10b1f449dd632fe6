package orchbench

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/config/crd"
)

// installCRD creates the RTResource CRD, from path or, when path is empty,
// the one built into the binary, unless it exists, and waits until it is
// Established.
func installCRD(ctx context.Context, cfg *rest.Config, path string) error {
	var manifest []byte
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read the RTResource CRD: %w", err)
		}
		manifest = raw
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return crd.Install(ctx, dyn, manifest)
}
