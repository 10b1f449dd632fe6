#!/usr/bin/env bash
# Builds the OpenFaaS gateway (Community Edition) that `gantry bench gateway`
# compares Gantry's gateway with, into
#   $GANTRY_CACHE/openfaas/<version>/gateway
# ($GANTRY_CACHE defaults to ~/.cache/gantry). The version is the one the
# wrapper module hack/openfaas/go.mod pins. The module proxy refuses to list
# the gateway's versions, so `go install ...@latest` cannot resolve it; the
# wrapper names the exact pseudo-version and `go build` of the module's main
# package inside it fetches that version alone.
#
# Safe to re-run: a binary already in the cache is skipped, the binary is
# moved into place only once it is complete, and a lock serialises
# concurrent runs. The binary's path is printed on stdout at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mod="$here/openfaas"
cache="${GANTRY_CACHE:-$HOME/.cache/gantry}"
GO="${GO:-go}"
pkg=github.com/openfaas/faas/gateway
# -mod=mod lets go fill in go.sum lines of the module cache it needs; the
# wrapper's go.mod and go.sum are committed, so normally nothing changes.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"

log() { printf '[openfaas %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v "$GO" >/dev/null || die "'$GO' not found: install Go 1.26 or set GO"
command -v flock >/dev/null || die "flock not found (util-linux)"

version=$(cd "$mod" && "$GO" list -m -f '{{.Version}}' "$pkg") ||
  die "cannot read the version of $pkg from hack/openfaas/go.mod"
# Keep in step with pkg/gatewaybench.OpenFaaSVersion (a test checks it).
dest="$cache/openfaas/$version"
out="$dest/gateway"
mkdir -p "$dest"

exec 9>"$dest/.lock"
if ! flock -n 9; then
  log "another build holds $dest/.lock; waiting for it"
  flock 9
fi
tmp="$dest/.gateway.tmp"
trap 'rm -f "$tmp"' EXIT

if [ -x "$out" ]; then
  log "gateway $version: cached"
  printf '%s\n' "$out"
  exit 0
fi

# A pseudo-version ends in the commit's short hash; the gateway prints it
# at start-up, so a log says which build answered.
commit=${version##*-}
ldflags="-s -w -X $pkg/version.Version=$version -X $pkg/version.GitCommitSHA=$commit"
log "gateway $version: building $pkg ($("$GO" env GOVERSION))"
start=$SECONDS
if ! (cd "$mod" && "$GO" build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg"); then
  die "building $pkg in hack/openfaas failed; the compiler output is above"
fi
mv -f "$tmp" "$out"
printf '%s\n' "openfaas-gateway=$version" >"$dest/versions"
log "gateway $version: built in $((SECONDS - start)) s"
printf '%s\n' "$out"
