#!/usr/bin/env bash
# Builds Knative Serving's controller, webhook, autoscaler, activator and
# queue-proxy (cmd/queue) from the module proxy into
#   $GANTRY_CACHE/knative/<version-key>/bin/
# and assembles Knative's manifests into .../config/: serving's config/core
# from the module zip, plus the files that are symlinks in Knative's
# repository and so are missing from the zip (the networking CRDs and
# config-network from knative.dev/networking/config/, the Image CRD from
# knative.dev/caching/config/image.yaml). The versions are the ones the
# wrapper module hack/knative/go.mod pins; docs/knative.md says how to bump
# them.
#
# Safe to re-run: a binary already in the cache is skipped, each binary and
# the config folder are moved into place only once complete, and a lock
# serialises concurrent runs. Any failure stops the script with a non-zero
# exit.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mod="$here/knative"
cache="${GANTRY_CACHE:-$HOME/.cache/gantry}"
GO="${GO:-go}"

log_tag=knative
# shellcheck source=lib/cached-build.sh
. "$here/lib/cached-build.sh"

command -v "$GO" >/dev/null || die "'$GO' not found: install Go 1.26 or set GO"

# module_field MODULE FIELD prints a field (Version, Dir) of MODULE as the
# wrapper module selects it.
module_field() {
  (cd "$mod" && "$GO" list -m -f "{{.$2}}" "$1") ||
    die "cannot read $2 of $1 from hack/knative/go.mod"
}

serving_version=$(module_field knative.dev/serving Version)
# Keep in step with pkg/knativeinstall.VersionKey (a test checks it).
key="serving-${serving_version}"
dest="$cache/knative/$key"
mkdir -p "$dest/bin"

take_lock

trap 'stop_ticker; rm -rf "$dest"/bin/.*.tmp "$dest"/.config.tmp' EXIT

# build NAME PACKAGE builds PACKAGE inside the wrapper module into bin/NAME,
# unless it is already there.
build() { go_build_cached "$1" "$mod" "$2"; }

# assemble_config copies serving's config/core and fills in the files that
# are symlinks in Knative's repository (absent from the module zip), then
# moves the folder into place in one rename.
assemble_config() {
  if [ -f "$dest/config/.complete" ]; then
    log "config: cached"
    return
  fi
  local serving networking caching tmp="$dest/.config.tmp"
  serving=$(module_field knative.dev/serving Dir)
  networking=$(module_field knative.dev/networking Dir)
  caching=$(module_field knative.dev/caching Dir)
  for d in "$serving" "$networking" "$caching"; do
    [ -n "$d" ] && [ -d "$d/config" ] || die "a Knative module is missing from the module cache (got '$d'); run: cd hack/knative && go mod download"
  done
  rm -rf "$tmp"
  mkdir -p "$tmp"
  cp -R "$serving/config/core/." "$tmp/"
  chmod -R u+w "$tmp"
  find "$tmp" -name '*.go' -delete
  local f
  for f in ingress serverlessservice certificate domain-claim; do
    [ -f "$networking/config/$f.yaml" ] || die "knative.dev/networking lacks config/$f.yaml"
    install -m 0644 "$networking/config/$f.yaml" "$tmp/300-resources/$f.yaml"
  done
  [ -f "$networking/config/config-network.yaml" ] || die "knative.dev/networking lacks config/config-network.yaml"
  install -m 0644 "$networking/config/config-network.yaml" "$tmp/configmaps/network.yaml"
  [ -f "$caching/config/image.yaml" ] || die "knative.dev/caching lacks config/image.yaml"
  install -m 0644 "$caching/config/image.yaml" "$tmp/300-imagecache.yaml"
  : >"$tmp/.complete"
  rm -rf "$dest/config"
  mv "$tmp" "$dest/config"
  log "config: assembled from serving, networking and caching"
}

total=$SECONDS
log "cache: $dest"
log "versions: serving $serving_version, networking $(module_field knative.dev/networking Version), caching $(module_field knative.dev/caching Version) ($("$GO" env GOVERSION))"
(cd "$mod" && "$GO" mod download knative.dev/serving knative.dev/networking knative.dev/caching) ||
  die "downloading the Knative modules failed"
assemble_config
build controller knative.dev/serving/cmd/controller
build webhook    knative.dev/serving/cmd/webhook
build autoscaler knative.dev/serving/cmd/autoscaler
build activator  knative.dev/serving/cmd/activator
build queue      knative.dev/serving/cmd/queue
printf '%s\n' "serving=$serving_version" \
  "networking=$(module_field knative.dev/networking Version)" \
  "caching=$(module_field knative.dev/caching Version)" >"$dest/versions"
log "done in $((SECONDS - total)) s: $dest"
