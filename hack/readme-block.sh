#!/usr/bin/env bash
# Runs the first ```sh block of a README section as written, less its
# `make build ...` line (the binaries are expected built and cached), and
# stops what it started if a command fails: the block's first background
# job (a controller) and the cluster.
#   hack/readme-block.sh 'Run on Kubernetes'
#   hack/readme-block.sh 'Run with Knative'
# hack/kubernetes-readme.sh and hack/knative-readme.sh name the sections.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 'README SECTION HEADING'" >&2; exit 2; }
cd "$(dirname "$0")/.."
section=$1
block=$(awk -v h="## $section" '
	$0 == h { in_section = 1; next }
	in_section && /^## / { exit }
	in_section && !in_block && $0 == "```sh" { in_block = 1; next }
	in_block && $0 == "```" { exit }
	in_block { print }' README.md | grep -v '^make build')
[ -n "$block" ] || { echo "no sh block under '## $section' in README.md" >&2; exit 1; }
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
