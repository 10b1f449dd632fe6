#!/usr/bin/env bash
# Runs a "Run on Kubernetes" block of the README as written (needs the
# cached control plane and bin/gantry: `make build controlplane`; the
# second block, process nodes, needs root), less its make line, and stops
# what it started if a command fails. The argument picks the block
# (default 1).
exec "$(dirname "$0")/readme-block.sh" 'Run on Kubernetes' "${1:-1}"
