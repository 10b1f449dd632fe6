#!/usr/bin/env bash
# Runs the Nth (default first) ```sh block of a README section as
# written, less its `make build ...` line (the binaries are expected built
# and cached), and stops what it started if a command fails: the block's
# background jobs (controller, gateway) and the cluster.
#   hack/readme-block.sh 'Run on Kubernetes' [N]
#   hack/readme-block.sh 'Run with Knative'
# hack/kubernetes-readme.sh and hack/knative-readme.sh name the sections.
set -euo pipefail
[ $# -eq 1 ] || [ $# -eq 2 ] || { echo "usage: $0 'README SECTION HEADING' [BLOCK NUMBER]" >&2; exit 2; }
cd "$(dirname "$0")/.."
section=$1 nth=${2:-1}
block=$(awk -v h="## $section" -v nth="$nth" '
	$0 == h { in_section = 1; next }
	in_section && /^## / { exit }
	in_section && !in_block && $0 == "```sh" { n++; if (n == nth) in_block = 1; next }
	in_block && $0 == "```" { exit }
	in_block { print }' README.md | grep -v '^make build' || true)
[ -n "$block" ] || { echo "no sh block $nth under '## $section' in README.md" >&2; exit 1; }
cleanup() {
	rc=$?
	if [ "$rc" -ne 0 ]; then
		for pid in $(jobs -p); do kill -INT "$pid" 2>/dev/null || true; done
		bin/gantry cluster down 2>/dev/null || true
	fi
	exit "$rc"
}
trap cleanup EXIT
eval "$block"
