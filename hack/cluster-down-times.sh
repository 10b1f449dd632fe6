#!/usr/bin/env bash
# Times `gantry cluster down` in its three phases (root; needs strace,
# bin/gantry and the cached control plane): from the command's start to
# the cluster process's SIGTERM (the gantry binary starting), from SIGTERM
# to the cluster process's exit (Stop: pods, components, pod networks),
# and from that exit to the command's (its poll, the folder's removal).
# Each run starts `gantry cluster up --nodes 1 --process-nodes 1` with a
# Deployment of 6 pods on the process node (KNATIVE=1: `cluster up
# --knative` with examples/knative/summarize.yaml instead) in its own
# folder. RUNS (default 3) sets how many. docs/controlplane.md has figures.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
dir=$(mktemp -d /tmp/gantry-down-times.XXXXXX)
trace=$dir.strace
kubectl=$(ls "${GANTRY_CACHE:-$HOME/.cache/gantry}"/controlplane/*/bin/kubectl | head -n1)
trap 'bin/gantry cluster down --dir "$dir/cluster" >/dev/null 2>&1 || true; rm -rf "$dir" "$trace"' EXIT
now() { date +%s.%N; }
# secs converts strace's HH:MM:SS.micro to seconds since midnight, UTC.
secs() { awk -F: '{printf "%.3f", $1*3600+$2*60+$3}' <<<"$1"; }
midnight() { awk '{printf "%.3f", $1 % 86400}' <<<"$1"; }
printf '%-4s %-8s %-14s %-14s %-14s %s\n' run load start-SIGTERM SIGTERM-exit exit-return total
for i in $(seq "$runs"); do
	if [ "${KNATIVE:-0}" = 1 ]; then
		export "$(bin/gantry cluster up --knative --dir "$dir/cluster" 2>/dev/null | tail -n1 | sed 's/^export //')"
		"$kubectl" apply -f examples/knative/summarize.yaml >/dev/null 2>&1
		"$kubectl" wait --for=condition=Ready ksvc/summarize --timeout=2m >/dev/null
	else
		export "$(bin/gantry cluster up --nodes 1 --process-nodes 1 --dir "$dir/cluster" 2>/dev/null | tail -n1 | sed 's/^export //')"
		"$kubectl" create deployment sl --image=x --replicas=6 -- sleep 1000 >/dev/null
		"$kubectl" wait --for=jsonpath='{.status.readyReplicas}'=6 deploy/sl --timeout=1m >/dev/null
	fi
	pid=$(cat "$dir/cluster/cluster.pid")
	strace -tt -e trace=exit_group -p "$pid" -o "$trace" 2>/dev/null &
	tracer=$!
	sleep 1 # strace attached
	s=$(now)
	bin/gantry cluster down --dir "$dir/cluster" 2>/dev/null
	e=$(now)
	wait "$tracer" || true
	sig=$(secs "$(grep -m1 SIGTERM "$trace" | awk '{print $1}')")
	ex=$(secs "$(grep -m1 -E 'exit_group|exited' "$trace" | awk '{print $1}')")
	s=$(midnight "$s") e=$(midnight "$e")
	printf '%-4s %-8s %-14s %-14s %-14s %s\n' "$i" "$(cut -d' ' -f1 /proc/loadavg)" \
		"$(bc <<<"$sig - $s")" "$(bc <<<"$ex - $sig")" "$(bc <<<"$e - $ex")" "$(bc <<<"$e - $s")"
done
