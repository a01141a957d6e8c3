# Sourced by scripts/bench.sh for `scripts/bench.sh herd` (it needs bench.sh's $work,
# $port and $redis_url: a private Redis): how many hosts one Redis serves.
#   1. 200 `cronlock run --schedule '* * * * *'` processes started within 100 ms on 20
#      keys (10 hosts per key, each its own --node, history off), as a fleet at 09:00:00:
#      exactly one run per key (FAIL otherwise), p50/p99 from just before exec to the
#      decision (the job's start, or the skipped process's exit), Redis commands per run
#      and Redis CPU per 1,000 runs (INFO commandstats and cpu deltas). Three rounds, each
#      in a new minute so that every key's tick is free.
#   2. lockrun/redis's BenchmarkHerd: simulated hosts each on a new connection per run, 1,000
#      keys, 100 → 10,000 at once. HERD_REDIS_URL=redis://… runs it against another
#      server (any URL --redis takes); by default it starts its own with 19,000 clients.
# Prints a Markdown section on stdout.
herd_bench() {
	go build -trimpath -o "$work/cronlock" .
	CGO_ENABLED=0 go build -trimpath -o "$work/benchtools" ./scripts/benchtools
	export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_HISTORY=off
	local round stats
	stats() { redis-cli -p "$port" INFO all | tr -d '\r' | grep -E '^(used_cpu_(sys|user)|cmdstat_)'; }
	for round in 1 2 3; do
		# All of a round in one minute, so that each key has one tick to run.
		while [ "$(date +%S | sed 's/^0//')" -gt 40 ]; do sleep 1; done
		redis-cli -p "$port" FLUSHALL >/dev/null
		redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
		"$work/cronlock" run --redis "$redis_url" -k warm -- true # load the scripts
		stats >"$work/herd-$round.before"
		echo "bench.sh: herd round $round of 3: 200 cronlock processes in 100 ms" >&2
		"$work/benchtools" herd -n 200 -keys 20 -spread 100ms -- \
			"$work/cronlock" run --redis "$redis_url" --schedule '* * * * *' >"$work/herd-$round.txt"
		stats >"$work/herd-$round.after"
		sleep $((61 - $(date +%S | sed 's/^0//'))) # the next round in the next minute
	done
	echo "bench.sh: BenchmarkHerd (100, 1000, 5000, 10000 simulated hosts)" >&2
	ulimit -n "$(ulimit -Hn)"
	CRONLOCK_BENCH_REDIS_URL="${HERD_REDIS_URL:-}" go test -run '^$' -bench '^BenchmarkHerd$' \
		-benchtime 20000x -timeout 30m ./lockrun/redis >"$work/herd-go.txt" 2>&1 || { cat "$work/herd-go.txt" >&2; exit 1; }
	BENCH_WORK="$work" python3 - <<'PY'
import os, re, statistics
work = os.environ["BENCH_WORK"]

def stats(path):
    cpu, calls = 0.0, {}
    for line in open(path):
        k, v = line.strip().split(":", 1)
        if k.startswith("used_cpu"):
            cpu += float(v)
        else:
            calls[k[8:]] = int(re.search(r"calls=(\d+)", v).group(1))
    return cpu, calls

inner = {"get", "set", "del", "pttl", "time", "publish", "info", "pexpire", "lpush", "ltrim", "lindex", "lset"}
fail, lat, rows = False, {"run": [], "skip": []}, []
for r in (1, 2, 3):
    runs = {}
    for line in open(f"{work}/herd-{r}.txt"):
        key, what, ns = line.split()
        if what == "error":
            fail = True
            continue
        lat[what].append(int(ns) / 1e6)
        runs[key] = runs.get(key, 0) + (what == "run")
    bad = {k: n for k, n in runs.items() if n != 1}
    if bad or len(runs) != 20:
        fail = True
    c0, k0 = stats(f"{work}/herd-{r}.before")
    c1, k1 = stats(f"{work}/herd-{r}.after")
    sent = {k: k1[k] - k0.get(k, 0) for k in k1 if k not in inner and k1[k] - k0.get(k, 0) > 0}
    sent["info"] = 0
    total = sum(sent.values()) - 1  # the INFO that read the figures
    rows.append((r, sum(runs.values()), total / 200, (c1 - c0) / 200 * 1e6, sent))

allv = sorted(lat["run"] + lat["skip"])
pct = lambda s, p: s[min(len(s) - 1, len(s) * p // 100)]
print("\n## The herd: how many hosts one Redis serves\n")
print("`scripts/bench.sh herd`. Three rounds, each in its own minute: 200 `cronlock run --redis … "
      "--schedule '* * * * *' --history off` processes (each its own `--node`) started within 100 ms "
      "on 20 keys, 10 per key, against one private Redis (the scripts loaded by a first run). The decision "
      "time runs from just before the exec to the job's start (a run) or the process's exit (a skip).\n")
print("| round | runs (want 20) | Redis commands per process | Redis CPU µs per process |")
print("|---|---|---|---|")
for r, n, cmds, cpu, sent in rows:
    print(f"| {r} | {n} | {cmds:.2f} ({', '.join(f'{k} {v}' for k, v in sorted(sent.items()) if v)}) | {cpu:.0f} |")
print()
print(f"- decision p50 **{pct(allv, 50):.1f} ms**, p99 **{pct(allv, 99):.1f} ms** (runs: p50 "
      f"{pct(sorted(lat['run']), 50):.1f} ms; skips: p50 {pct(sorted(lat['skip']), 50):.1f} ms)")
cpu = statistics.median(r[3] for r in rows)
print(f"- Redis CPU per 1,000 runs: **{cpu:.0f} ms** (goal ≤ 50 ms)")
print("- exactly one run per key and tick: " + ("**FAIL**" if fail else "**met**"))
print("\n`go test -run '^$' -bench '^BenchmarkHerd$' -benchtime 20000x ./lockrun/redis` (lockrun/redis/herd_bench_test.go): "
      "simulated hosts, each run on a new connection (a new redis.Locker), 1,000 keys, one tick per 10 runs "
      "of a key (one winner, nine skips), 20,000 runs per level, client and Redis on the same 2 cores.\n")
print("| hosts at once | decisions/s | p50 ms | p99 ms | Redis CPU ms / 1k runs | commands/run | failed |")
print("|---|---|---|---|---|---|---|")
for line in open(f"{work}/herd-go.txt"):
    m = re.match(r"BenchmarkHerd/hosts=(\d+)\S*\s+\d+\s+\d+ ns/op(.*)", line)
    if m:
        v = dict((u, float(x)) for x, u in re.findall(r"([\d.]+) (\S+)", m.group(2)))
        print(f"| {m.group(1)} | {v['decisions/s']:.0f} | {v['p50-ms']:.1f} | {v['p99-ms']:.1f} | "
              f"{v['redis-cpu-ms/1k-runs']:.0f} | {v['redis-cmds/run']:.2f} | {v['failed/run']:.3f} |")
if fail:
    print("\nFAIL: a key ran more or less than once, or a process failed")
PY
}

# herd_forms FORM (sentinel, cluster, or forms for plain, Sentinel and Cluster in turn):
# lockrun/redis's BenchmarkHerd against a private deployment of that form that the benchmark
# starts itself with internal/redistest, the tests' own starters (Sentinel: a master, one
# replica, three Sentinels; Cluster: three masters). HERD_HOSTS (default 100,1000) are the
# levels of simulated hosts, HERD_RUNS (default 20000) the runs per level. Redis CPU and
# commands are the data servers' (summed over a Cluster's masters); a Sentinel's own CPU
# is a column of its own. Prints a Markdown table on stdout.
herd_forms() {
	local forms=("$1") f
	[ "$1" = forms ] && forms=(plain sentinel cluster)
	ulimit -n "$(ulimit -Hn)"
	for f in "${forms[@]}"; do
		echo "bench.sh: BenchmarkHerd through $f (${HERD_HOSTS:-100,1000} simulated hosts)" >&2
		CRONLOCK_BENCH_REDIS_URL= CRONLOCK_BENCH_HERD_FORM=$f CRONLOCK_BENCH_HERD_HOSTS="${HERD_HOSTS:-100,1000}" \
			go test -run '^$' -bench '^BenchmarkHerd$' -benchtime "${HERD_RUNS:-20000}x" -timeout 30m \
			./lockrun/redis >"$work/herd-$f.txt" 2>&1 || { cat "$work/herd-$f.txt" >&2; exit 1; }
	done
	BENCH_WORK="$work" BENCH_FORMS="${forms[*]}" python3 - <<'PY'
import os, re
work = os.environ["BENCH_WORK"]
names = {"plain": "`redis://`", "sentinel": "`redis-sentinel://`", "cluster": "`redis-cluster://` (3 masters)"}
print("| form | hosts at once | decisions/s | p50 ms | p99 ms | Redis CPU ms / 1k runs | Sentinel CPU ms / 1k runs | commands/run | failed |")
print("|---|---|---|---|---|---|---|---|---|")
for f in os.environ["BENCH_FORMS"].split():
    for line in open(f"{work}/herd-{f}.txt"):
        m = re.match(r"BenchmarkHerd/hosts=(\d+)\S*\s+\d+\s+\d+ ns/op(.*)", line)
        if not m:
            continue
        v = dict((u, float(x)) for x, u in re.findall(r"([\d.]+) (\S+)", m.group(2)))
        sent = f"{v['sentinel-cpu-ms/1k-runs']:.0f}" if "sentinel-cpu-ms/1k-runs" in v else "–"
        print(f"| {names[f]} | {m.group(1)} | {v['decisions/s']:.0f} | {v['p50-ms']:.1f} | {v['p99-ms']:.1f} | "
              f"{v['redis-cpu-ms/1k-runs']:.0f} | {sent} | {v['redis-cmds/run']:.2f} | {v['failed/run']:.3f} |")
PY
}
