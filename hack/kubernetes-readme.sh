#!/usr/bin/env bash
# Runs the README's first "Run on Kubernetes" block as written (needs the
# cached control plane and bin/gantry: `make build controlplane`), less
# that make line, and stops what it started if a command fails.
exec "$(dirname "$0")/readme-block.sh" 'Run on Kubernetes'
