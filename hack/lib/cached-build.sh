# Shared by hack/build-controlplane.sh and hack/build-knative.sh (sourced):
# logging, the cache folder's lock, a still-building ticker and a cached,
# atomic `go build` inside a wrapper module. The caller sets log_tag before
# sourcing, and dest (the versioned cache folder) before take_lock.

log() { printf '[%s %s] %s\n' "$log_tag" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# take_lock serialises concurrent builds of one cache folder.
take_lock() {
  exec 9>"$dest/.lock"
  if ! flock -n 9; then
    log "another build holds $dest/.lock; waiting for it"
    flock 9
  fi
}

ticker_pid=""
stop_ticker() {
  if [ -n "$ticker_pid" ]; then
    kill "$ticker_pid" 2>/dev/null || true
    wait "$ticker_pid" 2>/dev/null || true
    ticker_pid=""
  fi
}

# start_ticker NAME prints a still-building line every 30 s, so a slow build
# is visibly alive.
start_ticker() {
  local name=$1 start=$SECONDS
  (
    while sleep 30; do
      log "  ... still building $name ($((SECONDS - start)) s)"
    done
  ) &
  ticker_pid=$!
}

# go_build_cached NAME MODULE_DIR PACKAGE [LDFLAGS] builds PACKAGE inside the
# wrapper module at MODULE_DIR into $dest/bin/NAME, unless it is already
# there; the binary is moved into place only once complete.
go_build_cached() {
  local name=$1 dir=$2 pkg=$3 ldflags=${4:-}
  local out="$dest/bin/$name"
  if [ -x "$out" ]; then
    log "$name: cached"
    return
  fi
  log "$name: building $pkg"
  local start=$SECONDS tmp="$dest/bin/.$name.tmp"
  start_ticker "$name"
  if ! (cd "$dir" && "$GO" build -trimpath -ldflags "-s -w $ldflags" -o "$tmp" "$pkg"); then
    stop_ticker
    die "building $name ($pkg in $dir) failed; the compiler output is above"
  fi
  stop_ticker
  mv -f "$tmp" "$out"
  log "$name: built in $((SECONDS - start)) s"
}
