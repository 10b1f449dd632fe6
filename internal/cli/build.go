package cli

import (
	"github.com/spf13/cobra"
)

// LocalBuildTag builds gantry without the commands that need the
// Kubernetes libraries (client-go, virtual-kubelet, controller-runtime):
// cluster, controller, node, bench queue, orchestration and e2e, and
// serve's --backend kubernetes and --knative-ingress. What is left is every
// command that runs on this machine alone (up, serve on local processes,
// fn, load, sim, bench gateway, simlive and coldstart), about a third of
// the packages, so `make run` compiles in a fraction of the time.
// `make build` builds the full binary. The files of the left-out commands
// carry `//go:build !gantry_local`; build_local.go puts stand-ins in their
// place that say so and name make build.
const LocalBuildTag = "gantry_local"

// notInThisBuild is the usage error (exit 2) of a command or flag that the
// local build leaves out.
func notInThisBuild(what string) error {
	return usagef("%s is not in this binary: it is the local build (-tags %s, what make run builds), "+
		"without the commands that need Kubernetes; make build builds the full bin/gantry", what, LocalBuildTag)
}

// leftOut is the local build's stand-in for a left-out command: it keeps
// the command's name, so asking for it, with any flags and arguments,
// gives notInThisBuild rather than "unknown command".
func leftOut(path, use, short string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short + " (not in this build: make build)",
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return notInThisBuild(path)
		},
	}
}
