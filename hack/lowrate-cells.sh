#!/bin/sh
# The 45 low-rate cells of issue 20 (docs/experiments.md, "Low rates"):
# 5 apps x 1, 5 and 20 requests/s x seeds 1-3, one hour of Poisson
# arrivals, heavy sizes, one worker each. Prints, per cell and policy,
# mean live containers, SLO compliance, missed requests and spawns, then
# how many cells gantry (or the first policy) meets: no more containers
# than commercial at no lower compliance.
#
# usage: hack/lowrate-cells.sh [GANTRY_BINARY] [POLICIES]
# default: bin/gantry, "gantry,commercial" (commercial must be listed).
set -eu
bin=${1:-bin/gantry}
policies=${2:-gantry,commercial}
for seed in 1 2 3; do
	for app in image-compression sentiment-analysis email-categorization audio-translation document-summary; do
		for rate in 1 5 20; do
			nice -n 10 "$bin" sim --app "$app" --dist heavy --trace poisson --rate "$rate" \
				--duration 1h --seed "$seed" --policies "$policies" --workers 1 --json |
				sed "s/^/$app $rate $seed /"
		done
	done
done | python3 -c '
import json, sys
met = {}
cells = 0
for line in sys.stdin:
    app, rate, seed, js = line.split(" ", 3)
    runs = {r["policy"]: r for r in json.loads(js)["runs"]}
    com = runs["commercial"]
    cells += 1
    for name, r in runs.items():
        miss = round(r["requests"] * (1 - r["slo_compliance"]))
        ok = ""
        if name != "commercial":
            good = r["avg_containers"] <= com["avg_containers"] and r["slo_compliance"] >= com["slo_compliance"]
            met[name] = met.get(name, 0) + good
            ok = "met" if good else "NOT MET"
        live, slo, spawned = r["avg_containers"], 100 * r["slo_compliance"], r["containers_spawned"]
        print(f"{app} {rate}/s seed {seed} {name}: {live:.3f} live, {slo:.3f}%, {miss} missed, {spawned} spawned {ok}")
for name, n in met.items():
    print(f"{name}: met on {n} of {cells} cells")
'
