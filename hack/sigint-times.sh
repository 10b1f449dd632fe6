#!/usr/bin/env bash
# How long each long-running gantry command takes to exit after SIGINT or
# SIGTERM, while it starts up and once it runs, and whether it left anything
# behind: a process of its tree, a network namespace gantry-<i>-*, an
# /etc/netns/gantry-<i>-* folder, a bridge gantry<i> or veth gpod<i>-*, the
# /24's address, or a state folder (../shared/conventions.md,
# docs/platform-kubernetes.md). Prints one table row per command, phase and
# signal; docs/controlplane.md has the figures and what they mean.
#
# Needs root (the process nodes' pod networks), bin/gantry from `make
# build`, the cached control plane and Knative builds (`make controlplane
# knative`), kubectl, curl and flock. Other gantry clusters may run beside
# it: it signals and checks only the processes it started (and their
# descendants) and the /24s its own nodes claimed.
#
#   hack/sigint-times.sh                          # every case, SIGINT and SIGTERM
#   CASES='node|controller' SIGNALS=INT hack/sigint-times.sh
#   CASES=list hack/sigint-times.sh               # the case names
#
# Columns: exit is the time from the signal until the signalled process
# exited; tree is until every process it started (pods, control-plane
# components, detached cluster) was gone; left names what remained 5 s
# later (then removed by this script), "-" for nothing.
set -uo pipefail
set -m # each case runs as a job of its own: its own process group, SIGINT not ignored

cd "$(dirname "$0")/.."
GANTRY=${GANTRY:-$PWD/bin/gantry}
CASES=${CASES:-.}
SIGNALS=${SIGNALS:-INT TERM}
W=$(mktemp -d /tmp/sigint-times.XXXXXX)
LOCKS=${TMPDIR:-/tmp}/gantry-processnode-addresses
RESULTS=$W/results
: >"$RESULTS"

die() { echo "sigint-times: $*" >&2; exit 1; }
[ -x "$GANTRY" ] || die "$GANTRY missing: make build"
[ "$(id -u)" = 0 ] || die "needs root (process nodes make network namespaces)"
for t in kubectl curl flock ip; do command -v $t >/dev/null || die "needs $t"; done

now() { echo "$EPOCHREALTIME"; }
usec() { local t=$EPOCHREALTIME; echo $((10#${t/./})); }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || shuf -i 20000-60000 -n1; }

# stat PID: the state and the start time of pid (fields 3 and 22 of
# /proc/PID/stat), in pure bash: the checks run every 50 ms.
stat() {
	local line
	{ read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
	local -a f=(${line##*) })
	echo "${f[0]} ${f[19]}"
}
# starttime of pid, so a reused pid is not taken for one of ours.
starttime() { local s; s=$(stat "$1") && echo "${s#* }"; }
alive() { # alive PID STARTTIME: the same process still runs (a zombie counts as gone)
	local line
	{ read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
	local -a f=(${line##*) })
	[ "${f[19]}" = "$2" ] && [ "${f[0]}" != Z ]
}

# track DIR ROOTPID: until DIR/stop exists, records every descendant of the
# root and of the processes already recorded (pid starttime name) in
# DIR/pids, the /24 claims they hold (lock files, as index) in DIR/indices,
# and the /tmp/gantry-* folders they name or work in in DIR/dirs.
track() {
	local dir=$1 root=$2
	echo "$root $(starttime "$root") root" >"$dir/pids"
	: >"$dir/indices"
	: >"$dir/dirs"
	while [ ! -e "$dir/stop" ]; do
		local known
		known=$(awk '{ print $1 }' "$dir/pids" | tr '\n' ' ')
		ps -eo pid=,ppid=,comm= | awk -v known="$known" '
			BEGIN { n = split(known, k, " "); for (i = 1; i <= n; i++) keep[k[i]] = 1 }
			{ parent[$1] = $2; name[$1] = $3 }
			END {
				do { changed = 0
					for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1; print p, name[p] }
				} while (changed)
			}' | while read -r pid name; do
			st=$(starttime "$pid") && echo "$pid $st $name" >>"$dir/pids"
		done
		while read -r pid st _; do
			alive "$pid" "$st" || continue
			for fd in /proc/"$pid"/fd/*; do
				t=$(readlink "$fd" 2>/dev/null) || continue
				case $t in "$LOCKS"/198.1[89].*.lock)
					ip=${t##*/}; ip=${ip%.lock}
					IFS=. read -r _ b c _ <<<"$ip"
					echo $(((b - 18) * 256 + c)) >>"$dir/indices" ;;
				esac
			done
			{ readlink "/proc/$pid/cwd"; tr '\0' '\n' <"/proc/$pid/cmdline"; } 2>/dev/null |
				grep -o '/tmp/gantry-[A-Za-z0-9._-]*' >>"$dir/dirs"
		done <"$dir/pids"
		for d in /tmp/gantry-cluster-*; do # owned temp folders name their owner
			[ -f "$d/owner.pid" ] && grep -qx "$(cat "$d/owner.pid" 2>/dev/null)" <(awk '{ print $1 }' "$dir/pids") && echo "$d" >>"$dir/dirs"
		done
		sort -u -o "$dir/indices" "$dir/indices"
		sort -u -o "$dir/dirs" "$dir/dirs"
		sleep 0.2
	done
}

# leftovers DIR: what of DIR's records still exists (and removes it).
leftovers() {
	local dir=$1 out=()
	local procs=()
	while read -r pid st name; do
		alive "$pid" "$st" && procs+=("$name:$pid")
	done <"$dir/pids"
	if [ ${#procs[@]} -gt 0 ]; then
		out+=("procs ${procs[*]}")
		while read -r pid st _; do alive "$pid" "$st" && kill -KILL "$pid" 2>/dev/null; done <"$dir/pids"
	fi
	while read -r i; do
		[ -n "$i" ] || continue
		local prefix="198.$((18 + i / 256)).$((i % 256)).0"
		# Another node may hold the /24 again by now: then what is there is its own.
		exec {fd}>>"$LOCKS/$prefix.lock" || continue
		if flock -n "$fd"; then
			local ns links etc addr
			ns=$(ip netns list | awk -v p="gantry-$i-" 'index($1, p) == 1 { print $1 }' | tr '\n' ' ')
			etc=$(ls -d /etc/netns/gantry-"$i"-* 2>/dev/null | tr '\n' ' ')
			links=$(ip -o link | awk -F': ' -v b="gantry$i" -v v="gpod$i-" '{ sub(/@.*/, "", $2) } $2 == b || index($2, v) == 1 { print $2 }' | tr '\n' ' ')
			addr=$(ip -o addr | grep -F " 198.$((18 + i / 256)).$((i % 256))." | awk '{ print $2 }' | tr '\n' ' ')
			[ -n "$ns" ] && out+=("netns $ns") && for n in $ns; do ip netns del "$n"; done
			[ -n "$etc" ] && out+=("etc $etc") && rm -rf $etc
			[ -n "$links" ] && out+=("links $links") && for l in $links; do ip link del "$l" 2>/dev/null; done
			[ -n "$addr" ] && out+=("addr on $addr")
		fi
		exec {fd}>&-
	done <"$dir/indices"
	while read -r d; do
		[ -n "$d" ] && [ -e "$d" ] && out+=("dir $d") && rm -rf "$d"
	done <"$dir/dirs"
	if [ ${#out[@]} -eq 0 ]; then echo -; else echo "${out[*]}"; fi
}

# gone DIR: succeeds once no recorded process runs.
gone() {
	while read -r pid st _; do alive "$pid" "$st" && return 1; done <"$1/pids"
	return 0
}

# measure NAME PHASE SIG READY CMD...: runs CMD in the background; PHASE
# "start" signals it START_AFTER seconds in (READY must not have
# succeeded yet), "run" once READY succeeds (a shell condition, with $LOG
# the command's output); then times the exit and checks what is left.
START_AFTER=${START_AFTER:-2}
READY_TIMEOUT=${READY_TIMEOUT:-600}
measure() {
	local name=$1 phase=$2 sig=$3 ready=$4
	shift 4
	local dir=$W/case-$(echo "$name-$phase-$sig" | tr -c 'A-Za-z0-9\n' '-')
	mkdir -p "$dir"
	LOG=$dir/log
	"$@" >"$LOG" 2>&1 &
	local pid=$!
	track "$dir" "$pid" &
	local tracker=$!
	local t0 note=""
	t0=$(now)
	if [ "$phase" = start ]; then
		sleep "${START_AFTER_CASE:-$START_AFTER}"
		eval "$ready" && note="(already ready)"
		kill -0 "$pid" 2>/dev/null || note="(exited by itself)"
	else
		until eval "$ready"; do
			if ! kill -0 "$pid" 2>/dev/null; then note="(exited before ready)"; break; fi
			if gt "$(secs "$t0" "$(now)")" "$READY_TIMEOUT"; then note="(not ready in ${READY_TIMEOUT}s)"; break; fi
			sleep 0.2
		done
	fi
	sleep 0.5 # one more sample of the tree
	local ts te tg rc
	ts=$(now)
	kill -s "$sig" "$pid"
	wait "$pid"
	rc=$?
	te=$(now)
	local limit=$(($(usec) + 10000000))
	while ! gone "$dir" && [ "$(usec)" -lt "$limit" ]; do sleep 0.02; done
	tg=$(now)
	sleep 0.3
	touch "$dir/stop"
	wait "$tracker"
	for d in ${EXTRA_DIRS:-}; do echo "$d" >>"$dir/dirs"; done
	sleep 5
	local left
	left=$(leftovers "$dir")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s %s\n' "$name" "$phase" "SIG$sig" "$(secs "$ts" "$te")" "$(secs "$ts" "$tg")" "$rc" "$left" "$note" |
		tee -a "$RESULTS" >&2
}

# A cluster for the commands that need one; its detached process is
# tracked through its pid file. Sets $KC.
cluster_up() { # cluster_up NAME FLAGS...
	local name=$1
	shift
	local dir=$W/$name
	"$GANTRY" cluster up --dir "$dir" "$@" >"$W/$name.up" 2>&1 || { cat "$W/$name.up" >&2; die "cluster up $name failed"; }
	echo "$dir/kubeconfig"
}

cluster_down() { # the time of `gantry cluster down`, and what it left
	local name=$1 dir=$W/$1 cdir=$W/case-down-$1
	mkdir -p "$cdir"
	local pid
	pid=$(cat "$dir/cluster.pid")
	track "$cdir" "$pid" &
	local tracker=$! t0 t1
	sleep 1
	t0=$(now)
	"$GANTRY" cluster down --dir "$dir" >/dev/null 2>&1
	local rc=$?
	t1=$(now)
	touch "$cdir/stop"
	wait "$tracker"
	echo "$dir" >>"$cdir/dirs"
	sleep 5
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "cluster down ($name)" run "-" "$(secs "$t0" "$t1")" "$(secs "$t0" "$t1")" "$rc" "$(leftovers "$cdir")" | tee -a "$RESULTS" >&2
}

ready_http() { curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null; }

want() { # want NAME...: CASES matches one of the case names
	local n
	for n in "$@"; do [[ $n =~ $CASES ]] && return 0; done
	return 1
}

CASE_NAMES=("cluster up" "cluster up --process-nodes 1" "cluster up --knative" "cluster serve" "cluster serve --knative"
	"node" "controller" "controller --knative" "serve --backend kubernetes" "serve --knative-ingress"
	"bench orchestration --quick" "bench orchestration --knative --quick" "bench e2e --quick" "bench queue")
if [ "$CASES" = list ]; then printf '%s\n' "${CASE_NAMES[@]}"; exit 0; fi

cleanup() {
	for d in "$W"/base "$W"/kn "$W"/up-*; do [ -f "$d/cluster.pid" ] && "$GANTRY" cluster down --dir "$d" >/dev/null 2>&1; done
}
trap cleanup EXIT

for sig in $SIGNALS; do
	# cluster up: interrupted while the control plane starts; the detached
	# `cluster serve` must stop too (tree). --knative also while Knative
	# installs, its longest part.
	n=0
	for flags in "" "--process-nodes 1" "--knative"; do
		name="cluster up${flags:+ $flags}"
		want "$name" || continue
		n=$((n + 1))
		d=$W/up-$sig-$n
		EXTRA_DIRS=$d START_AFTER_CASE=3 measure "$name" start "$sig" 'grep -q "^export KUBECONFIG=" "$LOG"' \
			"$GANTRY" cluster up --dir "$d" $flags
		if [ "$flags" = --knative ]; then
			d=$W/up-$sig-$n-kn
			EXTRA_DIRS=$d measure "$name (installing Knative)" run "$sig" 'grep -q "Knative Serving .* applied" "$LOG"' \
				"$GANTRY" cluster up --dir "$d" $flags
		fi
	done
	# The detached cluster itself, signalled as `cluster down` does.
	for flags in "--process-nodes 1" "--knative"; do
		name="cluster serve${flags/--process-nodes 1/}"
		name=${name/serve--/serve --}
		want "$name" || continue
		d=$W/serve-$sig${flags:+-kn}
		port=$(freeport)
		args=(cluster serve --dir "$d" --nodes 1 --process-nodes 1 --scheduler --controller-manager)
		[ "$flags" = --knative ] && args=(cluster serve --dir "$d" --nodes 0 --process-nodes 1 --scheduler --controller-manager --knative --knative-ingress "127.0.0.1:$port")
		mkdir -p "$d"
		measure "$name" start "$sig" 'grep -q "^KUBECONFIG=" "$LOG"' "$GANTRY" "${args[@]}"
		rm -rf "$d"
		mkdir -p "$d"
		measure "$name" run "$sig" 'grep -q "^KUBECONFIG=" "$LOG"' "$GANTRY" "${args[@]}"
		rm -rf "$d"
	done
done

# The commands that join a running cluster.
if want node controller "serve --backend kubernetes"; then
	# One function on the process node, as a Deployment: the backend's
	# informers and autoscaler run, and it holds a pod when stopped.
	printf 'version: 1.0\nfunctions:\n  sentiment:\n    image: dev.local/gantry-fn:sentiment\n    kind: deployment\n    scale: {min: 1}\n' >"$W/stack.yml"
	KC=$(cluster_up base --nodes 1 --process-nodes 1)
	kubectl --kubeconfig "$KC" apply --server-side -f config/crd/bases/gantry.dev_rtresources.yaml >/dev/null
fi
if want "controller --knative" "serve --knative-ingress"; then
	KN=$(cluster_up kn --knative)
	kubectl --kubeconfig "$KN" apply --server-side -f config/crd/bases/gantry.dev_rtresources.yaml >/dev/null
	kubectl --kubeconfig "$KN" apply -f config/knative/rbac.yaml >/dev/null
fi
for sig in $SIGNALS; do
	for phase in start run; do
		if want node; then
			measure node "$phase" "$sig" 'grep -q "node ready" "$LOG"' \
				"$GANTRY" node --name "sigint-${sig,,}-$phase" --kubeconfig "$KC"
			kubectl --kubeconfig "$KC" delete node "sigint-${sig,,}-$phase" --wait=false >/dev/null 2>&1
		fi
		if want controller; then
			p=$(freeport)
			START_AFTER_CASE=0.5 measure controller "$phase" "$sig" "ready_http http://127.0.0.1:$p/readyz" \
				"$GANTRY" controller --kubeconfig "$KC" --http-address "127.0.0.1:$p"
		fi
		if want "controller --knative"; then
			p=$(freeport) h=$(freeport)
			START_AFTER_CASE=0.5 measure "controller --knative" "$phase" "$sig" "ready_http http://127.0.0.1:$p/readyz" \
				"$GANTRY" controller --kubeconfig "$KN" --http-address "127.0.0.1:$p" --knative \
				--knative-webhook-address "127.0.0.1:$h" --knative-webhook-host 127.0.0.1 \
				--knative-webhook-url "https://127.0.0.1:$h/mutate"
		fi
		if want "serve --backend kubernetes"; then
			p=$(freeport)
			START_AFTER_CASE=0.5 measure "serve --backend kubernetes" "$phase" "$sig" "ready_http http://127.0.0.1:$p/healthz" \
				"$GANTRY" serve --backend kubernetes --kubeconfig "$KC" --namespace default --addr "127.0.0.1:$p" \
				--state-dir "$W/state-$sig-$phase" --stack "$W/stack.yml"
		fi
		if want "serve --knative-ingress"; then
			p=$(freeport) a=$(freeport) l=$(freeport)
			START_AFTER_CASE=0.5 measure "serve --knative-ingress" "$phase" "$sig" "ready_http http://127.0.0.1:$p/healthz" \
				"$GANTRY" serve --knative-ingress --kubeconfig "$KN" --addr "127.0.0.1:$p" --state-dir "$W/state-kn-$sig-$phase" \
				--knative-ingress-addr "127.0.0.1:$a" --knative-ingress-local-addr "127.0.0.1:$l"
		fi
	done
done
if want node controller "serve --backend kubernetes"; then cluster_down base; fi
if want "controller --knative" "serve --knative-ingress"; then cluster_down kn; fi

# The benchmarks, each with a control plane (or two) of its own.
for sig in $SIGNALS; do
	if want "bench orchestration --quick"; then
		START_AFTER_CASE=3 measure "bench orchestration --quick" start "$sig" false "$GANTRY" bench orchestration --quick
		measure "bench orchestration --quick" run "$sig" 'grep -q "rep 1: [0-9]* of" "$LOG"' "$GANTRY" bench orchestration --quick
	fi
	if want "bench orchestration --knative --quick"; then
		START_AFTER_CASE=3 measure "bench orchestration --knative --quick" start "$sig" false "$GANTRY" bench orchestration --knative --quick
		measure "bench orchestration --knative --quick" run "$sig" 'grep -q "rep 1: [0-9]* of" "$LOG"' "$GANTRY" bench orchestration --knative --quick
	fi
	if want "bench e2e --quick"; then
		START_AFTER_CASE=3 measure "bench e2e --quick" start "$sig" false "$GANTRY" bench e2e --quick
		measure "bench e2e --quick" run "$sig" 'grep -q "requests/s for" "$LOG"' "$GANTRY" bench e2e --quick
	fi
	if want "bench queue"; then
		START_AFTER_CASE=0.3 measure "bench queue" start "$sig" false "$GANTRY" bench queue --duration 5s
		measure "bench queue" run "$sig" 'gt "$(secs "$t0" "$(now)")" 2' "$GANTRY" bench queue --duration 5s
	fi
done

printf '\n| Command | Phase | Signal | Exit (s) | Tree gone (s) | Exit code | Left behind |\n|---|---|---|---|---|---|---|\n'
awk -F'\t' '{ printf "| `gantry %s` | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' "$RESULTS"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); logs in $W"
