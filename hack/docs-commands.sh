#!/usr/bin/env bash
# Runs the ```sh blocks of the user-facing pages in order, as written, from
# a fresh copy of this work tree built in a temporary folder, and prints
# PASS, FAIL or SKIP for each with its file and line, checks that every
# test name and repository path the pages give exists, then a summary line.
#
#   hack/docs-commands.sh                         # docs/platform.md and docs/platform-kubernetes.md
#   hack/docs-commands.sh docs/platform.md        # one page
#   DOCS_BLOCK=docs/platform.md:17 hack/docs-commands.sh   # one block
#
# A block runs as written unless HTML comments on the lines right above its
# fence say otherwise (the page shows the reason to its readers too):
#   <!-- docs-commands: skip REASON -->            not run, REASON printed
#   <!-- docs-commands: cluster -->                needs the cached control
#       plane (waits up to DOCS_CLUSTER_WAIT seconds for it, never builds
#       it); `bin/gantry cluster down` runs after the block, pass or fail
#   <!-- docs-commands: append PREFIX :: ARGS :: REASON -->
#       ARGS are added at the end of every line that starts with PREFIX
#       (before a trailing `# comment`, `>` or `&`): a later flag wins, so
#       a two-minute measurement runs for seconds, everything else as written
# Every loopback port the page names (127.0.0.1:8080, :9090) is replaced by
# a free one; the gateway's state, the cluster's folder and the outputs stay
# in the temporary folder; a block's background jobs get SIGINT, then SIGTERM, then SIGKILL
# when it ends; nothing is left running.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=(docs/platform.md docs/platform-kubernetes.md)
block_timeout=${DOCS_BLOCK_TIMEOUT:-900}
cluster_wait=${DOCS_CLUSTER_WAIT:-3600}

work=$(mktemp -d "${TMPDIR:-/tmp}/gantry-docs.XXXXXX")
clone=$work/src
cleanup() {
	# a block's own trap stops its jobs and cluster; this catches an
	# interrupted run
	if [ -x "$clone/bin/gantry" ] && [ -d "$work/cache/cluster" ]; then
		GANTRY_CACHE=$work/cache "$clone/bin/gantry" cluster down >/dev/null 2>&1
	fi
	rm -rf "$work"
}
trap cleanup EXIT
# SIGINT or SIGTERM: the running block gets it (through timeout, which
# passes it to the block's process group), then the EXIT trap cleans up.
block_pid=""
# running: the process exists and is not a zombie waiting to be reaped
running() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null)
	[ -n "$st" ] && [ "${st#Z}" = "$st" ]
}
interrupted() {
	echo "interrupted"
	if [ -n "$block_pid" ]; then
		# to its process group (timeout's, or the build's own): INT as a
		# user's Ctrl-C, then TERM, then KILL; a build at once (it has
		# nothing to save, and go build ignores INT in the background)
		local sig i
		for sig in $block_signals; do
			kill -"$sig" -- -"$block_pid" "$block_pid" 2>/dev/null
			for i in $(seq 20); do running "$block_pid" || break 2; sleep 0.1; done
		done
	fi
	exit 130
}
trap interrupted INT TERM

say() { printf '%s\n' "$*"; }

# A fresh copy: the tracked files of the work tree as they are now (edits
# not yet committed included), nothing else (no bin/, out/ or caches).
say "copying $(git -C "$repo" ls-files | wc -l) tracked files to $clone"
mkdir -p "$clone" "$work/state" "$work/cache"
cache_src=${GANTRY_CACHE:-$HOME/.cache/gantry}

# link_caches shows the cached control plane and Knative builds in the
# temporary GANTRY_CACHE, whose cluster/ folder is this run's own (another
# cluster on the machine keeps its own).
link_caches() {
	local d
	for d in "$cache_src"/*/; do
		[ -d "$d" ] || continue
		case $(basename "$d") in cluster) continue ;; esac
		[ -e "$work/cache/$(basename "$d")" ] || ln -s "${d%/}" "$work/cache/$(basename "$d")"
	done
}
(cd "$repo" && git ls-files -z | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$clone" || exit 1
(cd "$clone" && git init -q && git add -A && git -c user.name=docs -c user.email=docs@localhost commit -qm copy) || exit 1
say "building bin/gantry and bin/gantry-fn (go build, full binary)"
build_start=$SECONDS
(cd "$clone" && exec setsid nice -n 10 go build -o bin/ ./cmd/gantry ./examples/functions/cmd/gantry-fn) &
block_pid=$! block_signals=KILL
wait "$block_pid"
build_rc=$?
block_pid=""
if [ "$build_rc" -ne 0 ]; then
	say "FAIL build"
	exit 1
fi
build_took=$((SECONDS - build_start))
say "built in ${build_took} s"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# blocks PAGE prints one record per ```sh block: LINE<TAB>MARKERS, markers
# being the docs-commands comments right above the fence joined by \x1f.
blocks() {
	awk '
		/^<!-- docs-commands: .* -->$/ { m = (m == "" ? "" : m "\x1f") substr($0, 21, length($0) - 24); next }
		$0 == "```sh" { print NR "\t" m }
		{ m = "" }' "$1"
}

# block_body PAGE LINE prints the block whose fence is at LINE.
block_body() { awk -v s="$2" 'NR > s && /^```/ { exit } NR > s { print }' "$1"; }

# apply_append PREFIX ARGS adds ARGS to every stdin line starting with PREFIX.
apply_append() {
	awk -v p="$1" -v a="$2" '
		index($0, p) == 1 {
			line = $0; tail = ""
			if (match(line, / +#[^'"'"'"]*$/)) { tail = substr(line, RSTART); line = substr(line, 1, RSTART - 1) }
			if (match(line, / *(>[^'"'"'"]*|&)$/)) { tail = substr(line, RSTART) tail; line = substr(line, 1, RSTART - 1) }
			print line " " a tail; next
		}
		{ print }'
}

wait_for_controlplane() {
	local waited=0
	until ls "$cache_src"/controlplane/*/bin/kubectl >/dev/null 2>&1; do
		[ "$waited" -ge "$cluster_wait" ] && return 1
		[ $((waited % 300)) -eq 0 ] && say "  waiting for the control plane build ($cache_src/controlplane)"
		sleep 30
		waited=$((waited + 30))
	done
	link_caches
}

pass=0 fail=0 skip=0 failed=()
run_start=$SECONDS
say "load before: $(uptime)"
for page in "${pages[@]}"; do
	while IFS=$'\t' read -r line markers; do
		id="$page:$line"
		[ -n "${DOCS_BLOCK:-}" ] && [ "$DOCS_BLOCK" != "$id" ] && continue
		body=$(block_body "$clone/$page" "$line")
		cluster=0 skip_reason=""
		IFS=$'\x1f' read -ra ms <<<"$markers"
		for m in "${ms[@]}"; do
			case "$m" in
			skip\ *) skip_reason=${m#skip } ;;
			cluster) cluster=1 ;;
			append\ *)
				spec=${m#append }
				prefix=${spec%% :: *}
				rest=${spec#* :: }
				args=${rest%% :: *}
				body=$(apply_append "$prefix" "$args" <<<"$body")
				;;
			*) say "FAIL $id: unknown docs-commands marker '$m'"; fail=$((fail + 1)); failed+=("$id"); continue 2 ;;
			esac
		done
		if [ -n "$skip_reason" ]; then
			say "SKIP $id: $skip_reason"
			skip=$((skip + 1))
			continue
		fi
		if [ "$cluster" = 1 ] && ! wait_for_controlplane; then
			say "SKIP $id: no control plane in $cache_src after ${cluster_wait} s (make controlplane builds it)"
			skip=$((skip + 1))
			continue
		fi
		gw=$(free_port) ctl=$(free_port)
		body=${body//127.0.0.1:8080/127.0.0.1:$gw}
		body=${body//127.0.0.1:9090/127.0.0.1:$ctl}
		script=$work/block-${line}.sh log=$work/block-${line}.log
		{
			printf 'set -euo pipefail\ncd %q\n' "$clone"
			# the gateway's state and a cluster's folder in the temporary
			# folder; TMPDIR is left alone: process nodes claim their pod
			# addresses in a folder there that every cluster on the machine
			# shares
			printf 'export XDG_STATE_HOME=%q GANTRY_CACHE=%q\n' "$work/state/$line" "$work/cache"
			# stop what the block left running: as a user's Ctrl-C, then harder
			printf '%s\n' 'stop_jobs() { local rc=$? p; set +e; for p in $(jobs -p); do kill -INT "$p" 2>/dev/null; done
  for i in $(seq 100); do [ -z "$(jobs -pr)" ] && break; sleep 0.1; done
  for p in $(jobs -pr); do kill -TERM -- -"$p" "$p" 2>/dev/null; done; sleep 1
  for p in $(jobs -pr); do kill -KILL -- -"$p" "$p" 2>/dev/null; done'
			[ "$cluster" = 1 ] && printf '  bin/gantry cluster down >/dev/null 2>&1 || true\n'
			printf '  exit $rc; }\ntrap stop_jobs EXIT\nset -m\n'
			printf '%s\n' "$body"
		} >"$script"
		start=$SECONDS
		# in the background, so that a signal to this script is handled at
		# once rather than after the block
		timeout -s INT -k 30 "$block_timeout" nice -n 10 bash "$script" >"$log" 2>&1 </dev/null &
		block_pid=$! block_signals="INT TERM KILL"
		wait "$block_pid"
		rc=$?
		block_pid=""
		took=$((SECONDS - start))
		if [ "$rc" -eq 0 ]; then
			say "PASS $id (${took} s)"
			pass=$((pass + 1))
		else
			say "FAIL $id (exit $rc after ${took} s); the block as run and its last output:"
			sed 's/^/    | /' "$script" | tail -n +10
			tail -n 25 "$log" | sed 's/^/    > /'
			fail=$((fail + 1))
			failed+=("$id")
		fi
	done < <(blocks "$clone/$page")
done
# check_references: every test a page names (Test..., Benchmark..., also
# as a -run prefix) is a test function, and every path it names exists.
check_references() {
	local page=$1 n p missing=()
	for n in $(grep -oE '\b(Test|Benchmark)[A-Z][A-Za-z0-9_]+' "$clone/$page" | sort -u); do
		grep -rqE "func $n[A-Za-z0-9_]*\(" --include='*_test.go' "$clone" || missing+=("$n")
	done
	for p in $(grep -oE '(\./|`)(pkg|cmd|internal|examples|hack|config|docs)/[A-Za-z0-9_/.-]*[A-Za-z0-9_]' "$clone/$page" | sed 's/^[.`]\/\?//' | sort -u); do
		[ -e "$clone/$p" ] || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		say "PASS $page: every test and path it names exists"
		pass=$((pass + 1))
	else
		say "FAIL $page: names what the tree does not have: ${missing[*]}"
		fail=$((fail + 1))
		failed+=("$page:references")
	fi
}
[ -n "${DOCS_BLOCK:-}" ] || for page in "${pages[@]}"; do check_references "$page"; done
say "load after: $(uptime)"
say "blocks: ${pass} passed, ${fail} failed, ${skip} skipped in $((SECONDS - run_start)) s (build ${build_took} s before)"
[ ${#failed[@]} -eq 0 ] || say "failed: ${failed[*]}"
say "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
