#!/usr/bin/env bash
# Runs the README's "Run with Knative" commands as written (root; needs the
# cached control plane and Knative: `make build controlplane knative`),
# less that make line, and stops what they started if one fails.
# docs/knative.md ("Running it") has what a run measured.
set -euo pipefail
cd "$(dirname "$0")/.."
block=$(sed -n '/^## Run with Knative/,/^## Commands/p' README.md | sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' | grep -v '^make ')
[ -n "$block" ] || { echo "no Run with Knative block in README.md" >&2; exit 1; }
cleanup() {
	rc=$?
	if [ "$rc" -ne 0 ]; then
		kill -INT %1 2>/dev/null || true
		bin/gantry cluster down 2>/dev/null || true
	fi
	exit "$rc"
}
trap cleanup EXIT
eval "$block"
