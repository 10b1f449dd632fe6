#!/usr/bin/env bash
# Runs the README's "Run with Knative" commands as written (root; needs the
# cached control plane and Knative: `make build controlplane knative`),
# less that make line, and stops what they started if one fails.
# docs/knative.md ("Running it") has what a run measured.
exec "$(dirname "$0")/readme-block.sh" 'Run with Knative'
