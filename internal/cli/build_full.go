//go:build !gantry_local

package cli

import "github.com/spf13/cobra"

// fullBuild: this binary has every command (build.go).
const fullBuild = true

// kubeCommands are the top-level commands that need Kubernetes.
func kubeCommands() []*cobra.Command {
	return []*cobra.Command{newClusterCmd(), newControllerCmd(), newNodeCmd()}
}

// kubeBenchCommands are the benchmarks that need Kubernetes.
func kubeBenchCommands() []*cobra.Command {
	return []*cobra.Command{newBenchQueueCmd(), newBenchOrchestrationCmd(), newBenchE2ECmd()}
}
