#!/usr/bin/env bash
# Builds the pinned test control plane (etcd, kube-apiserver, kubectl,
# kube-controller-manager, kube-scheduler, kwok) into
#   $GANTRY_CACHE/controlplane/<version-key>/bin/
# and copies kwok's stage files into .../stages/. The versions are the ones
# the wrapper modules under hack/controlplane/ pin in their go.mod files;
# docs/controlplane.md says how to bump them.
#
# Safe to re-run: a binary already in the cache is skipped, each binary is
# moved into place only once it is complete, and a lock serialises
# concurrent runs. Any failure stops the script with a non-zero exit.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mods="$here/controlplane"
cache="${GANTRY_CACHE:-$HOME/.cache/gantry}"
GO="${GO:-go}"

log_tag=controlplane
# shellcheck source=lib/cached-build.sh
. "$here/lib/cached-build.sh"

command -v "$GO" >/dev/null || die "'$GO' not found: install Go 1.26 or set GO"

# module_version MODULE_DIR MODULE prints the version MODULE_DIR's go.mod selects.
module_version() {
  (cd "$mods/$1" && "$GO" list -m -f '{{.Version}}' "$2") ||
    die "cannot read the version of $2 from hack/controlplane/$1/go.mod"
}

etcd_version=$(module_version etcd go.etcd.io/etcd/server/v3)
kube_version=$(module_version kube k8s.io/kubernetes)
kwok_version=$(module_version kwok sigs.k8s.io/kwok)
# Keep in step with pkg/localcluster.VersionKey (a test checks it).
key="etcd-${etcd_version}_kube-${kube_version}_kwok-${kwok_version}"
dest="$cache/controlplane/$key"
mkdir -p "$dest/bin" "$dest/stages"

take_lock

trap 'stop_ticker; rm -f "$dest"/bin/.*.tmp' EXIT

# build NAME MODULE_DIR PACKAGE [LDFLAGS] builds PACKAGE inside the wrapper
# module hack/controlplane/MODULE_DIR into bin/NAME, unless it is already there.
build() { go_build_cached "$1" "$mods/$2" "$3" "${4:-}"; }

kube_ldflags() {
  local v=${kube_version#v} major minor
  major=${v%%.*}
  minor=${v#*.}
  minor=${minor%%.*}
  local pkgv
  for pkgv in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean ' \
      "$pkgv" "$kube_version" "$pkgv" "$major" "$pkgv" "$minor" "$pkgv"
  done
}

# copy_stages copies the kwok stages the control plane uses from the kwok
# module in the module cache: node initialise, heartbeat with lease, and the
# fast pod ready/complete/delete stages.
copy_stages() {
  local src
  src=$(cd "$mods/kwok" && "$GO" mod download -json sigs.k8s.io/kwok | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$src" ] && [ -d "$src/kustomize/stage" ] || die "kwok module not found in the module cache (got '$src')"
  local f
  for f in node/fast/node-initialize.yaml \
           node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    [ -f "$src/kustomize/stage/$f" ] || die "kwok stage $f missing from $src"
    install -m 0644 "$src/kustomize/stage/$f" "$dest/stages/$(basename "$f")"
  done
  log "kwok stages: copied from $src/kustomize/stage"
}

total=$SECONDS
log "cache: $dest"
log "versions: etcd $etcd_version, kubernetes $kube_version, kwok $kwok_version ($("$GO" env GOVERSION))"
build kube-apiserver          kube k8s.io/kubernetes/cmd/kube-apiserver          "$(kube_ldflags)"
build kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager "$(kube_ldflags)"
build kube-scheduler          kube k8s.io/kubernetes/cmd/kube-scheduler          "$(kube_ldflags)"
build kubectl                 kube k8s.io/kubernetes/cmd/kubectl                 "$(kube_ldflags)"
build etcd                    etcd go.etcd.io/etcd/server/v3
build kwok                    kwok sigs.k8s.io/kwok/cmd/kwok "-X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}"
copy_stages
printf '%s\n' "etcd=$etcd_version" "kubernetes=$kube_version" "kwok=$kwok_version" >"$dest/versions"
log "done in $((SECONDS - total)) s: $dest"
