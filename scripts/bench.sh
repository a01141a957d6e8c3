#!/usr/bin/env bash
# Measures cronlock's cost side by side with the tools it replaces, in one run:
#   - per-run overhead (median wall time, hyperfine): `true` direct, `flock -n FILE true`,
#     a bash + redis-cli SET NX / Lua-release wrapper, `etcdctl lock`, cronlock local,
#     cronlock Redis (both with the history on);
#   - output throughput: a job writing 1 GiB to stdout through cronlock's relay (64 KiB
#     tail kept) and with --capture 0, against the same job direct and through `cat`, with
#     stdout on /dev/null and on a pipe;
#   - output to a regular file (handed to the job) against a relay, the per-run cost of that
#     hand-off, and how fast `cronlock run -- yes | head -1` ends (output_files below;
#     `scripts/bench.sh output` runs only that part);
#   - lock hand-off: from a holder's child exiting to a --wait'ing run's child starting,
#     local and Redis;
#   - lock-loss detection: from the Redis lock key being deleted to the child's SIGTERM;
#   - peak RSS of cronlock while a job sleeps and while it writes output fast;
#   - the history at scale: queries and writes on a file of 1,000 and of 1,000,000 runs,
#     (history_scale below; `scripts/bench.sh history` runs only that part);
#   - the HTML report of 10,000 runs in headless chromium: first paint, load (report_bench
#     below; `scripts/bench.sh report` runs only that part).
# Needs: Go with cgo, python3, hyperfine, redis-server, and etcd-server + etcd-client for
# the etcdctl row (each installed with apt-get when missing, as root; without etcd that row
# says why it is missing). Starts a private Redis and a private etcd on free loopback ports
# with their data in a temporary folder, builds cronlock and scripts/benchtools (the
# stamping jobs and drivers) there, and stops and removes everything at the end. Takes
# about four minutes on two cores. Prints a Markdown report on stdout, progress on stderr:
# `scripts/bench.sh > BENCHMARKS.md` refreshes the file.
#
# `scripts/bench.sh ab REV` compares two builds instead: cronlock built from git revision
# REV and from the working tree, per-run overhead only (local, local with the history off,
# Redis, `version`), in six interleaved rounds of 100 runs each, the order of the two
# builds alternating, so that a drifting machine favours neither. Prints medians of all
# rounds and the new/old ratio, in about four minutes. AB_OLD_BIN and AB_NEW_BIN name
# ready binaries to compare instead of building either (REV then only labels the report),
# e.g. the dynamic build against the release's static one:
#   AB_OLD_BIN=/tmp/dynamic AB_NEW_BIN=dist/cronlock-v0.1.0-linux-amd64 scripts/bench.sh ab dynamic
#
# `scripts/bench.sh tick` measures what --schedule costs a short Redis run: the same build,
# `run -- true` with and without `--schedule '* * * * *'`, in six interleaved rounds of 100
# runs, the order alternating; before every run (of both kinds, so that both pay it) the
# tick record is deleted, so that each --schedule run claims a tick rather than skipping.
# Prints both medians and their ratio (the goal: within 5%), in about two minutes.
#
# `scripts/bench.sh ckpt`: what a job's `cronlock checkpoint save` and `load` cost against
# `cronlock version`, one save's backend write (p50, p99), and the socket's cost to a run
# that never uses it, in about a minute.
#
# `scripts/bench.sh herd`: how many hosts one Redis serves (scripts/bench_herd.sh says how),
# in about five minutes. `herd sentinel`, `herd cluster` and `herd forms` (all three forms,
# the plain server included) run its Go benchmark through a Sentinel deployment or a
# Cluster that it starts itself, in about two minutes per form.
#
# `scripts/bench.sh etcd [REV]`: a short run of the etcd build against `etcdctl lock` on a
# 3-member cluster, with the requests each sends (scripts/bench_etcd.sh says how; REV adds
# the build of that git revision, interleaved), in about two minutes.
#
# `scripts/bench.sh fleet` measures reading the fleet's record: a key given 1000 entries
# by 1000 real runs (CRONLOCK_FLEET_KEEP=1000), then `history --fleet --key K --limit 20`
# (table and --json), `--limit 0` (all 1000) and without --key (SCAN), 200 runs each with
# hyperfine, and the Redis round trips of one such read (INFO commandstats). In about a
# minute.
# `scripts/bench.sh takeover` measures standby takeover and checkpoints on a private Redis:
# the takeover latency (benchtools takeover: a holder's whole process tree SIGKILLed while a
# --standby run waits, to the standby's job start; 50 takeovers with --ttl 2s, and 50 on the
# local backend), one checkpoint save's backend write (the Go benchmark of lockrun/redis),
# `cronlock checkpoint save` and `load` against `cronlock version` (hyperfine, run inside
# a job of cronlock run, as a job runs them), the commands Redis receives for a short run
# without --standby (INFO commandstats), and the Redis connections that waiting standbys
# hold. In about five minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
	echo "bench.sh: installing $* with apt-get" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq "$@" >/dev/null
}
need() {
	command -v "$1" >/dev/null 2>&1 || apt_install "$2"
}
need hyperfine hyperfine
need redis-server redis-server
need flock util-linux

work=$(mktemp -d)
: >"$work/none.conf" # empty, so that the machine's own config is not read (a missing one is an error)
redis_pid=
etcd_pid=
shm_dir= # output_files' folder on tmpfs
cleanup() {
	for p in $redis_pid $etcd_pid; do
		{ kill "$p" && wait "$p"; } 2>/dev/null || true
	done
	rm -rf "$work"
	[ -z "$shm_dir" ] || rm -rf "$shm_dir"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		shuf -i 20000-60000 -n 1
}

# Other work on the machine: on two cores a parallel build or test run moves every figure.
# Wait up to 60 s for a quiet second, then measure anyway; the report says how much CPU
# time other processes took during the run (all CPU time used minus this script's own).
stat_cpu() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
busy_pct() {
	local a b
	a=($(stat_cpu))
	sleep 1
	b=($(stat_cpu))
	echo $(( b[1] > a[1] ? 100 * (b[0] - a[0]) / (b[1] - a[1]) : 0 ))
}
quiet_wait=0
while busy=$(busy_pct) && [ "$busy" -gt 10 ] && [ "$quiet_wait" -lt 60 ]; do
	[ "$quiet_wait" = 0 ] && echo "bench.sh: the CPU is $busy % busy with other work; waiting up to 60 s for it to calm down" >&2
	quiet_wait=$((quiet_wait + 1))
done
cpu_start=$(stat_cpu)

# reverse_commands NAME sets reversed to the hyperfine arguments in array NAME (triples of
# -n, a name, a command) with the commands in reverse order.
reverse_commands() {
	local -n cmds=$1
	reversed=()
	for ((i = ${#cmds[@]} - 3; i >= 0; i -= 3)); do reversed+=("${cmds[@]:i:3}"); done
}

# three_rounds NAME runs the hyperfine commands in array NAME in three rounds of 5 runs
# after 2 warm-up runs, the second round in reverse order, into $work/NAME-{1,2,3}.json.
three_rounds() {
	local -n cmds3=$1
	reverse_commands "$1"
	hyperfine --shell sh --warmup 2 --runs 5 --export-json "$work/$1-1.json" "${cmds3[@]}" >&2
	hyperfine --shell sh --runs 5 --export-json "$work/$1-2.json" "${reversed[@]}" >&2
	hyperfine --shell sh --runs 5 --export-json "$work/$1-3.json" "${cmds3[@]}" >&2
}

# History at scale (this section is history_scale; `scripts/bench.sh history` runs only it,
# in about two minutes, and prints only its report section, to paste into BENCHMARKS.md):
# the history package's BenchmarkScale (history/scale_bench_test.go) builds a history of
# 1,000 runs and one of 1,000,000 and times the same queries and writes on both, 5 rounds;
# then hyperfine times the CLI on the same two files.
history_scale() {
	echo "bench.sh: history at scale (builds a history of 1,000,000 runs)" >&2
	local c0 c1 hbin="$work/cronlock" k=report-001 f1 f2 id1 id2
	c0=$(stat_cpu)
	times >"$work/hs-times0"
	[ -x "$hbin" ] || go build -trimpath -o "$hbin" .
	CRONLOCK_SCALE_DIR="$work/scale" go test -run '^$' -bench '^BenchmarkScale$' -count 7 -benchtime 0.5s -v \
		./history >"$work/scale.txt" 2>&1 || { cat "$work/scale.txt" >&2; exit 1; }
	f1="$work/scale/history-1000.db" f2="$work/scale/history-1000000.db"
	# The short id of each file's newest run, as the table's ID column shows it.
	id1=$(COLUMNS= "$hbin" history --history "$f1" --limit 1 2>/dev/null | awk 'NR == 2 { print $1 }')
	id2=$(COLUMNS= "$hbin" history --history "$f2" --limit 1 2>/dev/null | awk 'NR == 2 { print $1 }')
	# No automatic retention (it runs only in `cronlock run`, but be sure), and the node
	# whose dead runs `history` reaps first is one of the file's six.
	CRONLOCK_HISTORY_RETENTION=off CRONLOCK_NODE=app-prod-1 \
		hyperfine -N --warmup 10 --runs 100 --export-json "$work/scale-cli.json" \
		-n 'history|1k' "$hbin history --history $f1" \
		-n 'history|1M' "$hbin history --history $f2" \
		-n 'history --limit 20|1k' "$hbin history --history $f1 --limit 20" \
		-n 'history --limit 20|1M' "$hbin history --history $f2 --limit 20" \
		-n 'history show ID|1k' "$hbin history show --history $f1 $id1" \
		-n 'history show ID|1M' "$hbin history show --history $f2 $id2" \
		-n "history --key $k|1k" "$hbin history --history $f1 --key $k" \
		-n "history --key $k|1M" "$hbin history --history $f2 --key $k" \
		-n "history stats --key $k|1k" "$hbin history stats --history $f1 --key $k" \
		-n "history stats --key $k|1M" "$hbin history stats --history $f2 --key $k" \
		-n "history stats|1k" "$hbin history stats --history $f1" \
		-n "history stats|1M" "$hbin history stats --history $f2" \
		>&2
	: >"$work/scale-dbstat.txt"
	command -v sqlite3 >/dev/null 2>&1 &&
		sqlite3 "$f2" "SELECT name, count(*), sum(pgsize) FROM dbstat GROUP BY name ORDER BY 3 DESC" \
			>"$work/scale-dbstat.txt" 2>/dev/null || true
	c1=$(stat_cpu)
	times >"$work/hs-times1"
	BENCH_WORK="$work" BENCH_HS_CPU="$c0 $c1 $(getconf CLK_TCK)" BENCH_HS_KEY="$k" python3 - <<'PY'
import json, os, re, statistics
E = os.environ
work = E["BENCH_WORK"]

# BenchmarkScale/rows=1000000/list-2  8827  141583 ns/op  98982 cpu-ns/op  (size: 371.8 bytes/run)
runs, cpus = {}, {}
for line in open(f"{work}/scale.txt"):
    m = re.match(r"BenchmarkScale/rows=(\d+)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) (ns/op|bytes/run)(?:\s+([\d.]+) cpu-ns/op)?", line)
    if m:
        key = (m.group(2), int(m.group(1)))
        runs.setdefault(key, []).append(float(m.group(3)))
        if m.group(5):
            cpus.setdefault(key, []).append(float(m.group(5)))
        w = re.search(r"([\d.]+) wal-pages/run", line)
        if w:
            runs.setdefault(("wal-pages", key[1]), []).append(float(w.group(1)))
med = {k: statistics.median(v) for k, v in runs.items()}
cmed = {k: statistics.median(v) for k, v in cpus.items()}
rounds = min(len(v) for v in runs.values())

def secs(t):  # `times` output: 1m2.345s
    m = re.fullmatch(r"(\d+)m([\d.]+)s", t)
    return int(m.group(1)) * 60 + float(m.group(2))
def own(name):  # user + sys of this shell's children so far
    return sum(secs(t) for t in open(f"{work}/{name}").read().split()[2:4])
b0, t0, b1, t1, hz = (int(x) for x in E["BENCH_HS_CPU"].split())
others = max(0.0, (b1 - b0) / hz - (own("hs-times1") - own("hs-times0")))
avail = (t1 - t0) / hz
share = 100 * others / avail if avail else 0

def verdict(ok):
    return "**met**" if ok else "**missed**"

k = E["BENCH_HS_KEY"]
print("\n## History at scale\n")
print(f"`go test -run '^$' -bench '^BenchmarkScale$' -count 7 -benchtime 0.5s ./history` "
      "(history/scale_bench_test.go) builds two history files with the same mix of runs — "
      "half of them from 10 busy keys, the rest from 290 others; six nodes; 90 % succeeded, then failed, "
      "skipped, timeout, error, abandoned, interrupted and lock_lost; no output tails — one of 1,000 runs "
      "and one of 1,000,000 (built in one INSERT … SELECT, indexes in place, in "
      + (lambda m: m.group(1) if m else "?")(re.search(r"1000000 runs in (\S+),", open(f"{work}/scale.txt").read()))
      + f"), and times each operation on both through the history package: medians of {rounds} rounds, "
      f"µs per operation. `{k}` is a busy key (50 runs in the small file, 50,000 in the large one). "
      f"Other processes used {share:.0f} % of the CPU time meanwhile"
      + (". " if share <= 5 else " (**not quiet**: figures noisier). ") + "\n")
print("| operation | 1k runs µs | 1M runs µs | 1M / 1k | goal | 1M / 1k of CPU time |")
print("|---|---|---|---|---|---|")
rows = [
    ("list", "List: newest 20 runs (`history --limit 20`)", 1.5),
    ("list-key", f"List: newest 20 of one key (`history --key {k}`)", 1.5),
    ("short-ids", "Short ids of the newest 20 (the table's ID column: two id-index steps each)", 1.5),
    ("resolve", "A short id back to its run (`history show 01a2…`)", 1.5),
    ("list-count", "Before: the newest 20 and a count of every run (the old footer, `20 of N runs shown`)", None),
    ("stats-last50", f"Stats of one key, window of 50 runs in both files", 1.5),
    ("stats", f"Stats of one key, default window (`history stats --key {k}`: 50 runs, then 1000)", None),
    ("start-finish", "Start + Finish of a new run (what a run longer than a second writes)", 1.5),
    ("insert-skipped", "Insert of a finished run (a skipped run; a shorter run writes about as much)", 1.5),
]
ok = {}
for name, what, goal in rows:
    a, b = med.get((name, 1000)), med.get((name, 1000000))
    if a is None or b is None:
        print(f"| {what} | not measured | | | | |")
        continue
    r = b / a
    if goal:
        ok[name] = r <= goal
        g = f"≤ {goal}×: {verdict(r <= goal)}"
    elif name == "list-count":
        g = "none: replaced by reading a 21st run"
    else:
        g = "none: the window is 20× larger"
    ca, cb = cmed.get((name, 1000)), cmed.get((name, 1000000))
    c = f"{cb/ca:.2f}×" if ca and cb else ""
    print(f"| {what} | {a/1000:.0f} | {b/1000:.0f} | **{r:.2f}×** | {g} | {c} |")
p1, p2 = med[("wal-pages", 1000)], med[("wal-pages", 1000000)]
print(f"| pages a new run writes (Start + Finish, WAL frames) | {p1:.1f} | {p2:.1f} | **{p2/p1:.2f}×** "
      f"| flat, ≤ 1.1×: {verdict(p2 / p1 <= 1.1)} | |")
s1, s2 = med[("size", 1000)], med[("size", 1000000)]
print(f"| bytes per run (file size / runs, after a checkpoint) | {s1:.0f} | {s2:.0f} | | ≤ 512 at 1M: {verdict(s2 <= 512)} | |")
print("\nTime goals are judged on wall time (what a user waits); the last column is the same ratio of "
      "the CPU time the test process used (getrusage), which other work on the machine disturbs less. "
      "\"Insert flat\" is judged on what a write does, the pages it writes (counted with automatic "
      "checkpoints off over 100 runs); its time may still grow a little with the depth of the B-trees "
      "(2 levels at 1k, 3–4 at 1M).")

db = [l.split("|") for l in open(f"{work}/scale-dbstat.txt").read().split()]
if db:
    total = sum(int(x[2]) for x in db)
    print("\nWhere the bytes of the 1M file are (sqlite3 dbstat; bytes per run, parts of at least 1 %): "
          + ", ".join(f"`{n}` {int(b)/1e6:.0f}" for n, c, b in db if int(b) >= total / 100) + ".")

cli = {r["command"]: r for r in json.load(open(f"{work}/scale-cli.json"))["results"]}
print("\nThe CLI on the same files (hyperfine -N, 100 runs after 10 warm-up runs; a whole process: "
      "start-up, open, reap of the node's dead runs, query, table on stdout):\n")
print("| command | 1k runs ms | 1M runs ms | 1M / 1k | goal |")
print("|---|---|---|---|---|")
goals = {"history": 1.5, "history --limit 20": 1.5, "history show ID": 1.5}
for name in dict.fromkeys(c.split("|")[0] for c in cli):
    a, b = cli[f"{name}|1k"]["median"] * 1000, cli[f"{name}|1M"]["median"] * 1000
    g = f"≤ {goals[name]}×: {verdict(b / a <= goals[name])}" if name in goals else ""
    print(f"| `cronlock {name}` | {a:.2f} | {b:.2f} | {b/a:.2f}× | {g} |")

print("\nWhat limits these figures:\n")
print("- Every query walks an index newest first and stops after its rows (EXPLAIN QUERY PLAN: "
      "`runs_started` for the newest runs, `runs_key_started` for one key, the covering "
      "`runs_key_status_started` for stats; `history/store_test.go` TestQueryPlans pins the first two), "
      "so a million runs add only one or two B-tree levels per lookup, from pages that stay cached. "
      "The CLI rows are mostly the start-up of a Go process and opening SQLite: compare "
      "`cronlock version` in the per-run table.")
print("- The default view (`history`, the newest 20) reads a 21st run to know whether older ones "
      "exist, rather than counting every matching run (the list-count row: what it cost before). "
      "Its ID column is two steps in the id index per row shown (the neighbours of each id, "
      "which hold the longest common start), and `history show` of a short id one range "
      "search there, so neither grows with the file.")
print("- `history stats` without `--key` summarises every key over its newest `--last` (1000) "
      "runs: it reads up to keys × 1000 index entries (300 keys: all 1,000 rows of the small "
      "file, about 300,000 of the large one), so it grows with the file until each key has "
      "1000 runs; `--key K` or a smaller `--last` bounds it. `status` reads only the locks "
      "(the lock folder, Redis or etcd), never the history file.")
print("- Start + Finish is mostly the per-run lock file (create, flock, rename, and unlink at the end: "
      "how a dead run is told from a live one) and the WAL checkpoint every ~200 pages, which do not "
      "depend on the file's size but move with other file-system work on the machine; Insert is the "
      "SQLite part alone, about what a run shorter than a second writes.")
print("- Bytes per run: the row itself (a 36-byte UUID text id, argv, backend, 16-byte boot id, "
      "times) and one entry in each index; the id's own index (`sqlite_autoindex_runs_1`) and "
      "the stats index are the largest after the table. Output tails, when kept, add up to "
      "`--capture` for each of the newest runs of a key only.")
PY
}
if [ "${1:-}" = history ]; then
	history_scale
	exit 0
fi

# Output to a file and a reader that goes away (this section is output_files; `scripts/bench.sh
# output` runs only it, in about two minutes, and prints only its report section):
#   - a job writing 1 GiB to stdout redirected to a regular file: direct; through `cat` (what a
#     relay into the file costs: cronlock relayed into files so before it handed them over);
#     cronlock, which hands the job the file and reads the tail back from it; --capture 0;
#   - the per-run cost of the hand-off: `cronlock run -- true` with stdout on /dev/null
#     (relayed: two pipes and two relays) and on a regular file (handed off: fstat, an
#     open of /proc/self/fd/1, a pread of the tail);
#   - `yes | head -1`: how long the pipeline takes to end, direct and through cronlock;
#   - `--output on-failure` against `always`: the 1 GiB job succeeding (so the spool, in
#     /var/tmp or $TMPDIR, is dropped), stdout on /dev/null and on a pipe, and cronlock's peak
#     RSS meanwhile (benchtools peakrss: stdout on a pipe).
output_files() {
	echo "bench.sh: output to a file, and yes | head -1" >&2
	local obin="$work/cronlock" c0 c1 job='head -c 1G /dev/zero' out="$work/file-out.bin"
	# On a disk, 1 GiB per run is decided by writeback (seconds per run, and minutes in all);
	# on tmpfs the figure is cronlock's own cost. The file is removed at the end.
	if shm_dir=$(mktemp -d -p /dev/shm 2>/dev/null); then
		out="$shm_dir/file-out.bin"
	fi
	[ -x "$obin" ] || go build -trimpath -o "$obin" .
	export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_HISTORY="$work/history.db" CRONLOCK_LOCK_DIR="$work/locks"
	c0=$(stat_cpu)
	times >"$work/of-times0"
	local -a files=(-n 'file: direct' "$job >$out"
		-n 'file: through cat (a relay)' "$job | cat >$out"
		-n 'file: cronlock (file handed to the job)' "$obin run -k bench-file -- $job >$out"
		-n 'file: cronlock --capture 0' "$obin run --capture 0 -k bench-file -- $job >$out")
	three_rounds files
	rm -f "$out"
	[ -z "$shm_dir" ] || rm -rf "$shm_dir"
	"$obin" run -k bench-handoff-cost -- true
	hyperfine -N --warmup 20 --runs 200 --output null --export-json "$work/handoff-cost-null.json" \
		-n 'cronlock local, stdout on /dev/null (relayed)' "$obin run -k bench-handoff-cost -- true" >&2
	hyperfine -N --warmup 20 --runs 200 --output "$work/run-out.txt" --export-json "$work/handoff-cost-file.json" \
		-n 'cronlock local, stdout on a file (handed off)' "$obin run -k bench-handoff-cost -- true" >&2
	hyperfine --shell sh --warmup 5 --runs 50 --export-json "$work/yes-head.json" \
		-n 'yes | head -1' 'yes | head -1' \
		-n 'cronlock run -- yes | head -1' "$obin run -k bench-yes -- yes | head -1" >&2
	local -a spool=(-n 'null: always' "$obin run -k bench-spool -- $job >/dev/null"
		-n 'null: on-failure' "$obin run -k bench-spool --output on-failure -- $job >/dev/null"
		-n 'pipe: always' "$obin run -k bench-spool -- $job | cat >/dev/null"
		-n 'pipe: on-failure' "$obin run -k bench-spool --output on-failure -- $job | cat >/dev/null")
	three_rounds spool
	local obt="$work/benchtools" rss_always rss_spool
	[ -x "$obt" ] || CGO_ENABLED=0 go build -trimpath -o "$obt" ./scripts/benchtools
	rss_always=$("$obt" peakrss -- "$obin" run -k bench-spool -- $job)
	rss_spool=$("$obt" peakrss -- "$obin" run -k bench-spool --output on-failure -- $job)
	c1=$(stat_cpu)
	times >"$work/of-times1"
	BENCH_WORK="$work" BENCH_OF_DIR="$(dirname "$out")" BENCH_RSS_ALWAYS="$rss_always" BENCH_RSS_SPOOL="$rss_spool" \
		BENCH_SPOOL_DIR="${TMPDIR:-/var/tmp}" BENCH_OF_CPU="$c0 $c1 $(getconf CLK_TCK)" python3 - <<'PY'
import json, os, re, statistics
E = os.environ
work = E["BENCH_WORK"]

def secs(t):  # `times` output: 1m2.345s
    m = re.fullmatch(r"(\d+)m([\d.]+)s", t)
    return int(m.group(1)) * 60 + float(m.group(2))
def own(name):
    return sum(secs(t) for t in open(f"{work}/{name}").read().split()[2:4])
b0, t0, b1, t1, hz = (int(x) for x in E["BENCH_OF_CPU"].split())
others = max(0.0, (b1 - b0) / hz - (own("of-times1") - own("of-times0")))
avail = (t1 - t0) / hz
share = 100 * others / avail if avail else 0
def verdict(ok):
    return "**met**" if ok else "**missed**"

merged = {}
for i in (1, 2, 3):
    for r in json.load(open(f"{work}/files-{i}.json"))["results"]:
        m = merged.setdefault(r["command"], {"times": [], "cpu": []})
        m["times"] += r["times"]
        m["cpu"].append(r["user"] + r["system"])
print("\n## Output to a file, and a reader that goes away\n")
where = ("on tmpfs (`/dev/shm`), so that the disk's writeback does not decide the figure"
         if E["BENCH_OF_DIR"].startswith("/dev/shm") else "in the folder of `mktemp -d`")
print("`head -c 1G /dev/zero` (4 KiB writes) as the job, its stdout redirected to a regular file "
      f"(`>FILE`, {where}): direct, through one `cat` (what relaying into the file "
      "costs), and through cronlock run (local lock, history on) with the default `--capture 64KiB`, "
      "which hands the job the file itself and reads the tail back from it afterwards, and with "
      "`--capture 0`. hyperfine, three rounds of 5 runs (the second in reverse order) after 2 warm-up "
      f"runs, shell spawn time subtracted. Other processes used {share:.0f} % of the CPU time meanwhile"
      + (".\n" if share <= 5 else " (**not quiet**: figures noisier).\n"))
print("| command | median ms | GiB/s | min … max ms | CPU ms (user + sys, mean) |")
print("|---|---|---|---|---|")
med = {}
for k, m in merged.items():
    t = m["times"]
    med[k] = statistics.median(t)
    print(f"| {k.split(': ', 1)[1]} | {med[k]*1000:.0f} | {1/med[k]:.2f} | {min(t)*1000:.0f} … {max(t)*1000:.0f} "
          f"| {statistics.mean(m['cpu'])*1000:.0f} |")
d, c, h, z = (med[f"file: {n}"] for n in ("direct", "through cat (a relay)", "cronlock (file handed to the job)", "cronlock --capture 0"))
print(f"\n- hand-off / direct: **{d/h:.2f}×** the throughput (goal: equal, ≥ 0.95×: {verdict(d/h >= 0.95)}); "
      f"a relay (`cat`) / direct: {d/c:.2f}×; hand-off / relay: **{c/h:.2f}×**; `--capture 0` / direct: {d/z:.2f}×")

rn = json.load(open(f"{work}/handoff-cost-null.json"))["results"][0]
rf = json.load(open(f"{work}/handoff-cost-file.json"))["results"][0]
print("\nPer-run cost of the hand-off: `cronlock run -- true` (local lock, history on), hyperfine -N, "
      "200 runs after 20 warm-up runs, its stdout on /dev/null (a device: relayed) and on a regular "
      "file (handed off).\n")
print("| stdout | median ms | mean ± σ ms |")
print("|---|---|---|")
for name, r in (("/dev/null (relayed)", rn), ("a file (handed off)", rf)):
    print(f"| {name} | {r['median']*1000:.2f} | {r['mean']*1000:.2f} ± {r['stddev']*1000:.2f} |")
print(f"\n- handed off / relayed: **{rf['median']/rn['median']:.3f}×**")

yh = {r["command"]: r for r in json.load(open(f"{work}/yes-head.json"))["results"]}
a, b = yh["yes | head -1"], yh["cronlock run -- yes | head -1"]
print("\nA reader that goes away: `yes | head -1`, direct and with cronlock in front of `yes` "
      "(hyperfine --shell sh, 50 runs after 5 warm-up runs, shell spawn time subtracted): the time until "
      "the whole pipeline has ended. cronlock closes its end of the job's pipe at the first EPIPE, so "
      "`yes` dies of SIGPIPE as it does without cronlock.\n")
print("| pipeline | median ms | max ms |")
print("|---|---|---|")
for r in (a, b):
    print(f"| `{r['command'].replace('|', chr(92) + '|')}` | {r['median']*1000:.2f} | {max(r['times'])*1000:.2f} |")
print(f"\n- through cronlock: **{b['median']*1000:.1f} ms** (goal ≤ 100 ms: {verdict(b['median'] <= 0.1)}); "
      f"a whole `cronlock run -- true` costs about the same (per-run table)")

sp = {}
for i in (1, 2, 3):
    for r in json.load(open(f"{work}/spool-{i}.json"))["results"]:
        m = sp.setdefault(r["command"], {"times": [], "cpu": []})
        m["times"] += r["times"]
        m["cpu"].append(r["user"] + r["system"])
print("\n### `--output on-failure` against `always`\n")
print(f"The same 1 GiB job, succeeding (so cron gets nothing with `on-failure`: the spool in "
      f"`{E['BENCH_SPOOL_DIR']}` is filled and dropped), its stdout on `/dev/null` and on a pipe "
      "(`| cat >/dev/null`). hyperfine, three rounds of 5 runs (the second in reverse order) after "
      "2 warm-up runs, shell spawn time subtracted.\n")
print("| stdout | --output | median ms | GiB/s | min … max ms | CPU ms (user + sys, mean) |")
print("|---|---|---|---|---|---|")
smed = {}
for k, m in sp.items():
    t = m["times"]
    smed[k] = statistics.median(t)
    where, mode = k.split(": ", 1)
    print(f"| {where} | {mode} | {smed[k]*1000:.0f} | {1/smed[k]:.2f} | {min(t)*1000:.0f} … {max(t)*1000:.0f} "
          f"| {statistics.mean(m['cpu'])*1000:.0f} |")
for where in ("null", "pipe"):
    q = smed[f"{where}: always"] / smed[f"{where}: on-failure"]
    print(f"\n- {where}: on-failure / always: **{q:.2f}×** the throughput (goal ≥ 0.9×: {verdict(q >= 0.9)})", end="")
print(f"\n- peak RSS of cronlock (VmHWM) while the job prints 1 GiB to a pipe: always "
      f"{int(E['BENCH_RSS_ALWAYS'])/1024:.1f} MiB, on-failure **{int(E['BENCH_RSS_SPOOL'])/1024:.1f} MiB**")
PY
}
if [ "${1:-}" = output ]; then
	output_files
	exit 0
fi

port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --dir "$work" --save "" --appendonly no --daemonize no \
	--logfile "$work/redis.log" &
redis_pid=$!
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis_url="redis://127.0.0.1:$port/0"

# ab_compare REV: see the comment at the top.
ab_compare() {
	local rev=$1 round i
	if [ -n "${AB_OLD_BIN:-}" ]; then
		cp "$AB_OLD_BIN" "$work/cronlock-old"
	else
		echo "bench.sh: building cronlock from $rev" >&2
		git worktree add --detach -q "$work/old-src" "$rev"
		(cd "$work/old-src" && go build -trimpath -o "$work/cronlock-old" .)
		git worktree remove --force "$work/old-src"
	fi
	if [ -n "${AB_NEW_BIN:-}" ]; then
		cp "$AB_NEW_BIN" "$work/cronlock-new"
	else
		go build -trimpath -o "$work/cronlock-new" .
	fi
	export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_LOCK_DIR="$work/locks"
	local -a cmds=()
	for b in old new; do # each build its own history file, warmed up first
		CRONLOCK_HISTORY="$work/ab-$b.db" "$work/cronlock-$b" run -k ab-local -- true
		CRONLOCK_HISTORY="$work/ab-$b.db" "$work/cronlock-$b" run --redis "$redis_url" -k ab-redis -- true
	done
	for round in 1 2 3 4 5 6; do
		cmds=()
		local order="old new"
		[ $((round % 2)) = 0 ] && order="new old"
		for b in $order; do
			cmds+=(-n "$b|version" "$work/cronlock-$b version"
				-n "$b|local, history off" "$work/cronlock-$b run --history off -k ab-local -- true"
				-n "$b|local" "$work/cronlock-$b run --history $work/ab-$b.db -k ab-local -- true"
				-n "$b|redis" "$work/cronlock-$b run --history $work/ab-$b.db --redis $redis_url -k ab-redis -- true")
		done
		echo "bench.sh: round $round of 6 ($order)" >&2
		hyperfine -N --warmup 10 --runs 100 --export-json "$work/ab-$round.json" "${cmds[@]}" >&2
	done
	BENCH_WORK="$work" BENCH_REV="$rev" python3 - <<'PY'
import json, os, statistics
work, rev = os.environ["BENCH_WORK"], os.environ["BENCH_REV"]
times = {}
for r in range(1, 7):
    for res in json.load(open(f"{work}/ab-{r}.json"))["results"]:
        times.setdefault(res["command"], []).extend(res["times"])
print(f"Per-run overhead, cronlock `{rev}` (old) and the new build"
      + (" (ready binaries, AB_OLD_BIN/AB_NEW_BIN)" if os.environ.get("AB_OLD_BIN") else " from the working tree") + ": "
      "medians of 600 runs each, in six rounds of 100 with the builds' order alternating "
      "(`scripts/bench.sh ab " + rev + "`).\n")
print("| command | old ms | new ms | new / old |")
print("|---|---|---|---|")
for name in dict.fromkeys(k.split("|", 1)[1] for k in times):
    o = statistics.median(times[f"old|{name}"]) * 1000
    n = statistics.median(times[f"new|{name}"]) * 1000
    print(f"| `cronlock {name}` | {o:.2f} | {n:.2f} | {n/o:.3f} |")
PY
}
tick_ab() {
	local round
	go build -trimpath -o "$work/cronlock" .
	export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_HISTORY="$work/tick.db" CRONLOCK_NODE=bench
	: >"$work/none.conf"
	local run="$work/cronlock run --redis $redis_url -k ab-tick"
	local prep="redis-cli -p $port DEL cronlock:{ab-tick}:tick"
	$run -- true
	$run --schedule '* * * * *' -- true
	for round in 1 2 3 4 5 6; do
		local -a tcmds=(-n "plain" "$run -- true" -n "schedule" "$run --schedule '* * * * *' -- true")
		if [ $((round % 2)) = 0 ]; then
			reverse_commands tcmds
			tcmds=("${reversed[@]}")
		fi
		echo "bench.sh: tick round $round of 6" >&2
		hyperfine -N --warmup 10 --runs 100 --prepare "$prep" --export-json "$work/tick-$round.json" "${tcmds[@]}" >&2
	done
	BENCH_WORK="$work" python3 - <<'PY'
import json, os, statistics
work = os.environ["BENCH_WORK"]
times = {}
for r in range(1, 7):
    for res in json.load(open(f"{work}/tick-{r}.json"))["results"]:
        times.setdefault(res["command"], []).extend(res["times"])
p = statistics.median(times["plain"]) * 1000
s = statistics.median(times["schedule"]) * 1000
print("A short Redis run (`run -- true`, history on) with and without `--schedule '* * * * *'`: "
      "medians of 600 runs each, six interleaved rounds of 100, the tick record deleted before "
      "every run (`scripts/bench.sh tick`).\n")
print("| run | median ms |")
print("|---|---|")
print(f"| without --schedule | {p:.2f} |")
print(f"| with --schedule | {s:.2f} |")
print(f"| with / without | {s/p:.3f} |")
PY
}
# takeover_bench: see the comment at the top.
takeover_bench() {
	go build -trimpath -o "$work/cronlock" .
	CGO_ENABLED=0 go build -trimpath -o "$work/benchtools" ./scripts/benchtools
	local cl="$work/cronlock" bt="$work/benchtools" n=${TAKEOVERS:-50}
	export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_HISTORY="$work/takeover.db" CRONLOCK_NODE=bench
	local sb=(run --ttl 2s --grace 300ms --schedule '* * * * *' --tz UTC --standby)
	echo "bench.sh: $n takeovers on Redis (--ttl 2s)" >&2
	"$bt" takeover -n "$n" -period 667ms -out "$work/takeover-redis.txt" -- "$cl" "${sb[@]}" --redis "$redis_url" 2>"$work/takeover.log" ||
		{ cat "$work/takeover.log" >&2; exit 1; }
	echo "bench.sh: $n takeovers on the local backend" >&2
	CRONLOCK_LOCK_DIR="$work/locks" "$bt" takeover -n "$n" -period 667ms -out "$work/takeover-local.txt" -- \
		"$cl" "${sb[@]}" --backend local 2>"$work/takeover.log" || { cat "$work/takeover.log" >&2; exit 1; }

	echo "bench.sh: one checkpoint save's Redis write (go test -bench)" >&2
	CRONLOCK_TEST_REDIS_ADDR="127.0.0.1:$port" go test -run '^$' -bench 'BenchmarkCheckpointSave$' -benchtime 3000x \
		./lockrun/redis/ >"$work/ckpt-write.txt"

	echo "bench.sh: checkpoint save and load against version, inside a job" >&2
	"$cl" run --redis "$redis_url" -k ckpt-bench -- hyperfine -N --warmup 20 --runs 300 \
		--export-json "$work/ckpt-cmd.json" \
		-n "checkpoint save VALUE" "$cl checkpoint save customer-000123456" \
		-n "checkpoint load" "$cl checkpoint load" \
		-n "version" "$cl version" >&2

	echo "bench.sh: the commands of a short run on the wire" >&2
	local wire=()
	local args
	for args in "-k wire-plain" "-k wire-tick --schedule '* * * * *'" "-k wire-standby --schedule '* * * * *' --standby"; do
		redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
		eval "\"\$cl\" run --redis \"\$redis_url\" $args -- true"
		wire+=("$args=$(redis-cli -p "$port" INFO commandstats | grep -v config |
			sed -n 's/^cmdstat_\([a-z|]*\):calls=\([0-9]*\).*/\1 \2/p' | tr '\n' ',')")
	done

	echo "bench.sh: connections of waiting standbys (10 keys, 2 standbys each)" >&2
	local k c0 c1 c2 pids=()
	c0=$(redis-cli -p "$port" INFO clients | sed -n 's/^connected_clients:\([0-9]*\).*/\1/p')
	for k in $(seq 10); do
		"$cl" run --redis "$redis_url" -k "conn-$k" --ttl 5s --schedule '* * * * *' -- sleep 30 &
		pids+=($!)
	done
	sleep 2
	c1=$(redis-cli -p "$port" INFO clients | sed -n 's/^connected_clients:\([0-9]*\).*/\1/p')
	for k in $(seq 10); do
		"$cl" run --redis "$redis_url" -k "conn-$k" --ttl 5s --schedule '* * * * *' --standby -- true 2>/dev/null &
		pids+=($!)
		"$cl" run --redis "$redis_url" -k "conn-$k" --ttl 5s --schedule '* * * * *' --standby -- true 2>/dev/null &
		pids+=($!)
	done
	sleep 3
	c2=$(redis-cli -p "$port" INFO clients | sed -n 's/^connected_clients:\([0-9]*\).*/\1/p')
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true

	BENCH_WORK="$work" BENCH_N="$n" BENCH_WIRE="$(printf '%s\n' "${wire[@]}")" BENCH_CONN="$c0 $c1 $c2" python3 - <<'PY'
import json, math, os, re, statistics
E = os.environ
work = E["BENCH_WORK"]
def samples_ms(name):
    return sorted(int(l) / 1e6 for l in open(f"{work}/{name}.txt") if l.strip())
def pct(s, p):
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]
print(f"Standby takeover (`scripts/bench.sh takeover`): a holder's cronlock and its job's whole "
      f"process tree SIGKILLed (its host lost) while a `--standby` run waits, to the standby's job "
      f"start; {E['BENCH_N']} takeovers each, `--ttl 2s`, a fresh key (tick) each, the holder killed at a random "
      f"moment of its renewal period (ttl/3). Goal: p99 ≤ TTL + 1 s.\n")
print("| backend | p50 ms | p99 ms | max ms | goal |")
print("|---|---|---|---|---|")
for name, label, goal in (("takeover-redis", "Redis", 3000), ("takeover-local", "local (no TTL: the guard frees the flock)", 3000)):
    s = samples_ms(name)
    print(f"| {label} | {pct(s,50):.0f} | {pct(s,99):.0f} | {s[-1]:.0f} | {'met' if pct(s,99) <= goal else 'missed'} |")
w = open(f"{work}/ckpt-write.txt").read()
m50, m99 = re.search(r"([\d.]+) p50-µs", w), re.search(r"([\d.]+) p99-µs", w)
if m50 and m99:
    print(f"\nOne checkpoint save's Redis write (the fenced script; `BenchmarkCheckpointSave`, 3000 saves "
          f"on loopback): p50 {float(m50.group(1))/1000:.2f} ms, p99 **{float(m99.group(1))/1000:.2f} ms** (goal ≤ 2 ms).")
res = {r["command"]: r for r in json.load(open(f"{work}/ckpt-cmd.json"))["results"]}
v = statistics.median(res["version"]["times"]) * 1000
print("\nThe job's commands, run inside a job of `cronlock run` on Redis (hyperfine, 300 runs each; "
      "each is a whole cronlock process talking to its run over the run's socket). Goal: save ≤ 3× `version`.\n")
print("| command | median ms | × version |")
print("|---|---|---|")
for name in ("checkpoint save VALUE", "checkpoint load", "version"):
    t = statistics.median(res[name]["times"]) * 1000
    print(f"| `cronlock {name}` | {t:.2f} | {t/v:.2f} |")
print("\nCommands Redis received for one short run (`run -- true`, INFO commandstats):\n")
print("| run | commands (calls) |")
print("|---|---|")
for line in E["BENCH_WIRE"].splitlines():
    args, _, cmds = line.partition("=")
    print(f"| `run {args} -- true` | {cmds.strip(',').replace(',', ', ')} |")
c0, c1, c2 = map(int, E["BENCH_CONN"].split())
per = (c2 - c1) / 20
print(f"\nConnections: 10 keys held by 10 runs add {c1-c0} Redis connections; 20 waiting standbys "
      f"(the default `--standbys 2` per key) add {c2-c1}: {per:.1f} per standby, so "
      f"**{per*2000:.0f} per 1,000 keys** with two standbys each, for as long as the holders run.")
PY
}
# ckpt_bench: what checkpoints cost. Inside one Redis run, `cronlock checkpoint save`,
# `checkpoint load` and `cronlock version` (three interleaved rounds of 100, the order
# alternating): the whole command a job runs against its goal of 3x `version`; then one
# save's backend write (the fenced script) on this loopback Redis, p50 and p99 of 20,000
# (BenchmarkCheckpointSave); and what the socket costs a run that never uses it
# (BenchmarkListenClose).
ckpt_bench() {
	local round
	go build -trimpath -o "$work/cronlock" .
	export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_HISTORY=off CRONLOCK_NODE=bench
	: >"$work/none.conf"
	local b="$work/cronlock"
	for round in 1 2 3; do
		local -a ccmds=(-n "checkpoint save" "$b checkpoint save customer-000123456"
			-n "checkpoint load" "$b checkpoint load" -n "version" "$b version")
		if [ $((round % 2)) = 0 ]; then
			reverse_commands ccmds
			ccmds=("${reversed[@]}")
		fi
		echo "bench.sh: checkpoint round $round of 3" >&2
		# A save first, so that every load finds one whatever the order.
		"$b" run --redis "$redis_url" -k bench-ckpt -- sh -c '"$0" checkpoint save first && exec "$@"' "$b" \
			hyperfine -N --warmup 10 --runs 100 --export-json "$work/ckpt-$round.json" "${ccmds[@]}" >&2
	done
	CRONLOCK_TEST_REDIS_ADDR="127.0.0.1:$port" go test -run '^$' -bench 'BenchmarkCheckpointSave' \
		-benchtime 20000x ./lockrun/redis/ >"$work/ckpt-go.txt"
	go test -run '^$' -bench 'BenchmarkListenClose' -benchtime 20000x ./checkpoint/ >>"$work/ckpt-go.txt"
	BENCH_WORK="$work" python3 - <<'PY'
import json, os, re, statistics
work = os.environ["BENCH_WORK"]
times = {}
for r in range(1, 4):
    for res in json.load(open(f"{work}/ckpt-{r}.json"))["results"]:
        times.setdefault(res["command"], []).extend(res["times"])
v = statistics.median(times["version"]) * 1000
print("Checkpoints on a loopback Redis (`scripts/bench.sh ckpt`): the commands a job runs, medians "
      "of 300 runs each, three interleaved rounds of 100, inside one `cronlock run`:\n")
print("| command | median ms | / version |")
print("|---|---|---|")
for name in ("checkpoint save", "checkpoint load", "version"):
    m = statistics.median(times[name]) * 1000
    print(f"| `cronlock {name}` | {m:.2f} | {m/v:.2f} |")
go = open(f"{work}/ckpt-go.txt").read()
m = re.search(r"BenchmarkCheckpointSave\S*\s+\d+\s+(\d+) ns/op\s+([\d.]+) p50-µs\s+([\d.]+) p99-µs", go)
if m:
    print(f"\nOne save's backend write (the fenced script, go-redis, 20,000 saves): p50 **{float(m.group(2))/1000:.3f} ms**, "
          f"p99 **{float(m.group(3))/1000:.3f} ms** (goal p99 ≤ 2 ms).")
m = re.search(r"BenchmarkListenClose\S*\s+\d+\s+(\d+) ns/op", go)
if m:
    print(f"\nThe run's checkpoint socket, made and closed by a run that never uses it: **{int(m.group(1))/1000:.0f} µs** "
          "(no backend round trip: `TestShortRunRoundTrips` counts them).")
PY
}
fleet_read() {
	go build -trimpath -o "$work/cronlock" .
	export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_HISTORY=off CRONLOCK_NODE=bench CRONLOCK_FLEET_KEEP=1000
	local i
	echo "bench.sh: 1000 runs to fill the record" >&2
	for i in $(seq 1000); do
		CRONLOCK_NODE="vm$((i % 3))" "$work/cronlock" run --redis "$redis_url" -k fleet-bench -- true
	done
	local n
	n=$(redis-cli -p "$port" LLEN 'cronlock:{fleet-bench}:runs')
	[ "$n" = 1000 ] || { echo "bench.sh: the record holds $n entries, not 1000" >&2; exit 1; }
	local h="$work/cronlock history --fleet --redis $redis_url"
	hyperfine -N --warmup 10 --runs 200 --export-json "$work/fleet.json" \
		-n "history --fleet --key K --limit 20" "$h --key fleet-bench --limit 20" \
		-n "history --fleet --key K --limit 20 --json" "$h --key fleet-bench --limit 20 --json" \
		-n "history --fleet --key K --limit 0 (1000)" "$h --key fleet-bench --limit 0" \
		-n "history --fleet --limit 20 (SCAN)" "$h --limit 20" \
		-n "check --key K --max-age 1h" "$work/cronlock check --redis $redis_url --key fleet-bench --max-age 1h" \
		-n "version (process start-up)" "$work/cronlock version" >&2
	redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
	$h --key fleet-bench --limit 20 >/dev/null
	local cmds
	cmds=$(redis-cli -p "$port" INFO commandstats | grep -v config | sed -n 's/^cmdstat_\([a-z|]*\):calls=\([0-9]*\).*/\1=\2/p' | tr '\n' ' ')
	BENCH_WORK="$work" BENCH_CMDS="$cmds" python3 - <<'PY'
import json, os, statistics
work = os.environ["BENCH_WORK"]
res = json.load(open(f"{work}/fleet.json"))["results"]
print("Reading the fleet's record of a key holding 1000 entries (`scripts/bench.sh fleet`): "
      "medians of 200 runs (hyperfine), each a whole cronlock process.\n")
print("| command | median ms |")
print("|---|---|")
for r in res:
    print(f"| `cronlock {r['command']}` | {statistics.median(r['times']) * 1000:.2f} |")
print(f"\nCommands Redis received for one `history --fleet --key K --limit 20`: "
      f"{os.environ['BENCH_CMDS'].strip()} (LRANGE and "
      "the two GETs travel in one pipeline: one round trip).")
PY
}
# The report at 10,000 runs (report_bench; `scripts/bench.sh report` runs only it, in about
# a minute, and prints only its report section): the Go benchmarks of package report, which
# lay out and write a page of 10,000 runs (20 keys, 3 nodes, a week) and load it in
# Debian's headless chromium (installed with apt-get when missing), reading the first
# contentful paint, the load event and the first frame after it from the browser's own
# clock. Three rounds of five loads; medians.
report_bench() {
	need chromium chromium
	echo "bench.sh: the report at 10,000 runs (headless chromium)" >&2
	local out
	out=$(go test ./report/ -run '^$' -bench 'Write10k|ChromiumFirstPaint10k' -benchtime 5x -count 3)
	BENCH_OUT="$out" BENCH_CHROMIUM="$(chromium --version 2>/dev/null | head -1)" python3 - <<'PY'
import os, re, statistics
rows = {}
for line in os.environ["BENCH_OUT"].splitlines():
    m = re.match(r"Benchmark(\S+?)-\d+\s+\d+\s+(.*)", line)
    if not m:
        continue
    vals = re.findall(r"([\d.]+) (\S+)", m.group(2))
    for v, unit in vals:
        rows.setdefault((m.group(1), unit), []).append(float(v))
def med(name, unit):
    return statistics.median(rows[(name, unit)])
print("\n## The report at 10,000 runs\n")
print("`cronlock report --html` of 10,000 runs (20 keys on 3 nodes over a week), loaded from "
      f"its file in headless {os.environ['BENCH_CHROMIUM']} (1400×900, no GPU); medians of three "
      "rounds of five loads, on the browser's clock from navigation start "
      "(`go test ./report/ -bench ChromiumFirstPaint10k`).\n")
print("| figure | median |")
print("|---|---|")
print(f"| layout and HTML in Go (`report.Write`) | {med('Write10k', 'ns/op') / 1e6:.0f} ms |")
print(f"| page size | {med('ChromiumFirstPaint10k', 'page-MB'):.1f} MB |")
fp = med('ChromiumFirstPaint10k', 'first-paint-ms')
print(f"| first contentful paint | {fp:.0f} ms |")
print(f"| load event (parsed, laid out, script run) | {med('ChromiumFirstPaint10k', 'load-ms'):.0f} ms |")
print(f"| first frame after it, the whole timeline drawn (an upper bound: asked for over the DevTools pipe) | {med('ChromiumFirstPaint10k', 'timeline-frame-ms'):.0f} ms |")
print(f"\n- first paint ≤ 1 s: **{'met' if fp <= 1000 else 'missed'}** ({fp:.0f} ms); the whole "
      "timeline is drawn well within it too. One element per run and one delegated listener "
      "for the hover card keep the page light.")
PY
}
if [ "${1:-}" = report ]; then
	report_bench
	exit 0
fi
if [ "${1:-}" = herd ]; then
	source scripts/bench_herd.sh
	case "${2:-}" in
	"") herd_bench ;;
	sentinel | cluster | forms) herd_forms "$2" ;;
	*) echo "usage: scripts/bench.sh herd [sentinel|cluster|forms]" >&2; exit 2 ;;
	esac
	exit 0
fi
if [ "${1:-}" = etcd ]; then
	source scripts/bench_etcd.sh
	etcd_bench "${2:-}"
	exit 0
fi
if [ "${1:-}" = tick ]; then
	tick_ab
	exit 0
fi
if [ "${1:-}" = takeover ]; then
	takeover_bench
	exit 0
fi
if [ "${1:-}" = ckpt ]; then
	ckpt_bench
	exit 0
fi
if [ "${1:-}" = fleet ]; then
	fleet_read
	exit 0
fi
if [ "${1:-}" = ab ]; then
	[ -n "${2:-}" ] || { echo "usage: scripts/bench.sh ab REV" >&2; exit 2; }
	ab_compare "$2"
	exit 0
fi

# etcd: a one-member cluster on two free loopback ports, data (and its fsync'd WAL) in
# $work, on the same file system as cronlock's history.
etcd_why=
if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
	if ! apt_install etcd-server etcd-client >"$work/apt-etcd.log" 2>&1; then
		etcd_why="apt-get install etcd-server etcd-client failed: $(tail -n 1 "$work/apt-etcd.log")"
	fi
fi
if [ -z "$etcd_why" ] && ! command -v etcdctl >/dev/null 2>&1; then
	etcd_why="etcd-server/etcd-client installed no etcd and etcdctl commands"
fi
if [ -z "$etcd_why" ]; then
	eport=$(free_port)
	epeer=$(free_port)
	etcd --name bench --data-dir "$work/etcd" \
		--listen-client-urls "http://127.0.0.1:$eport" --advertise-client-urls "http://127.0.0.1:$eport" \
		--listen-peer-urls "http://127.0.0.1:$epeer" --initial-advertise-peer-urls "http://127.0.0.1:$epeer" \
		--initial-cluster "bench=http://127.0.0.1:$epeer" >"$work/etcd.log" 2>&1 &
	etcd_pid=$!
	export ETCDCTL_API=3
	for _ in $(seq 1 100); do
		etcdctl --endpoints="127.0.0.1:$eport" endpoint health >/dev/null 2>&1 && break
		sleep 0.1
	done
	if ! etcdctl --endpoints="127.0.0.1:$eport" lock bench-etcd true >/dev/null 2>&1; then
		etcd_why="the private etcd did not serve \`etcdctl lock\` within 10 s: $(tail -n 1 "$work/etcd.log")"
	fi
fi
etcd_version=
[ -z "$etcd_why" ] && etcd_version=$(etcd --version | awk '/etcd Version/ {print $3}')

echo "bench.sh: building cronlock and benchtools" >&2
go build -trimpath -o "$work/cronlock" .
CGO_ENABLED=0 go build -trimpath -o "$work/benchtools" ./scripts/benchtools
bin="$work/cronlock"
bt="$work/benchtools"
export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_HISTORY="$work/history.db" CRONLOCK_LOCK_DIR="$work/locks"

# The hand-written wrapper cronlock replaces: SET NX PX with a random token, run, then a
# token-checked Lua release.
cat >"$work/wrapper.sh" <<WRAP
#!/usr/bin/env bash
set -u
tok=\$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
[ "\$(redis-cli -p $port SET cronlock-bench:wrap "\$tok" NX PX 60000)" = OK ] || exit 0
"\$@"; rc=\$?
redis-cli -p $port EVAL "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) end return 0" 1 cronlock-bench:wrap "\$tok" >/dev/null
exit \$rc
WRAP
chmod +x "$work/wrapper.sh"

# Warm the history file so the runs measure the steady state, not schema creation.
"$bin" run -k bench-local -- true
"$bin" run --redis "$redis_url" -k bench-redis -- true

# 1. Per-run overhead: three rounds of 100 runs of every command, the order reversed in
# the second round, so that a machine whose speed drifts during the minutes of a round (a
# VM's neighbours) does not favour the commands measured first; the report merges them.
echo "bench.sh: per-run overhead" >&2
overhead=(-n 'true (direct)' 'true'
	-n 'flock -n FILE true' "flock -n $work/flock.lock true"
	-n 'bash + redis-cli wrapper' "$work/wrapper.sh true")
[ -z "$etcd_why" ] && overhead+=(-n 'etcdctl version (its start-up floor)' 'etcdctl version'
	-n 'etcdctl lock' "etcdctl --endpoints=127.0.0.1:$eport lock bench-etcd true")
overhead+=(-n 'Go program doing nothing (static, no cgo)' "$bt noop"
	-n 'cronlock version (Go start-up floor)' "$bin version"
	-n 'cronlock local, history off' "$bin run --history off -k bench-local -- true"
	-n 'cronlock local' "$bin run -k bench-local -- true"
	-n 'cronlock redis' "$bin run --redis $redis_url -k bench-redis -- true")
reverse_commands overhead
hyperfine -N --warmup 20 --runs 100 --export-json "$work/overhead-1.json" "${overhead[@]}" >&2
hyperfine -N --warmup 5 --runs 100 --export-json "$work/overhead-2.json" "${reversed[@]}" >&2
hyperfine -N --warmup 5 --runs 100 --export-json "$work/overhead-3.json" "${overhead[@]}" >&2

# 2. Output throughput: 1 GiB in 4 KiB writes (what `head -c` and a stdio program on a
# pipe do). hyperfine's shell runs the pipelines; its spawn time is subtracted. Three
# rounds of 5 runs, the second in reverse order, as for the overhead.
echo "bench.sh: output throughput" >&2
job='head -c 1G /dev/zero'
throughput=(-n 'null: direct' "$job >/dev/null"
	-n 'null: through cat' "$job | cat >/dev/null"
	-n 'null: cronlock' "$bin run -k bench-tp -- $job >/dev/null"
	-n 'null: cronlock --capture 0' "$bin run --capture 0 -k bench-tp -- $job >/dev/null"
	-n 'pipe: direct' "$job | cat >/dev/null"
	-n 'pipe: through cat' "$job | cat | cat >/dev/null"
	-n 'pipe: cronlock' "$bin run -k bench-tp -- $job | cat >/dev/null"
	-n 'pipe: cronlock --capture 0' "$bin run --capture 0 -k bench-tp -- $job | cat >/dev/null")
reverse_commands throughput
hyperfine --shell sh --warmup 2 --runs 5 --export-json "$work/throughput-1.json" "${throughput[@]}" >&2
hyperfine --shell sh --runs 5 --export-json "$work/throughput-2.json" "${reversed[@]}" >&2
hyperfine --shell sh --runs 5 --export-json "$work/throughput-3.json" "${throughput[@]}" >&2

# 3. Peak RSS (VmHWM of the cronlock process), Redis and history on.
echo "bench.sh: peak RSS" >&2
rss_idle=$("$bt" peakrss -- "$bin" run --redis "$redis_url" -k bench-rss -- sleep 1.5)
rss_out=$("$bt" peakrss -- "$bin" run --redis "$redis_url" -k bench-rss -- $job)

# 4. Lock hand-off, 200 per backend, and the stamping job's own start-up.
echo "bench.sh: lock hand-off" >&2
hyperfine -N --warmup 20 --runs 200 --export-json "$work/noop.json" "$bt noop" >/dev/null 2>&1
handoffs=200
"$bt" handoff -n "$handoffs" -out "$work/handoff-local.txt" -- \
	"$bin" run --wait 30s -k bench-handoff -- 2>"$work/handoff.log" ||
	{ cat "$work/handoff.log" >&2; exit 1; }
"$bt" handoff -n "$handoffs" -out "$work/handoff-redis.txt" -redis "127.0.0.1:$port" \
	-channel 'cronlock:{bench-handoff}:released' -- \
	"$bin" run --redis "$redis_url" --wait 30s -k bench-handoff -- 2>"$work/handoff.log" ||
	{ cat "$work/handoff.log" >&2; exit 1; }

# 5. Lock-loss detection: --ttl 3s renews every 1 s; the key is deleted at a random moment.
echo "bench.sh: lock-loss detection" >&2
losses=20
"$bt" lockloss -n "$losses" -out "$work/lockloss.txt" -redis "127.0.0.1:$port" \
	-lockkey 'cronlock:{bench-loss}:lock' -period 1s -- \
	"$bin" run --redis "$redis_url" --ttl 3s -k bench-loss -- 2>"$work/lockloss.log" ||
	{ cat "$work/lockloss.log" >&2; exit 1; }

# CPU time of this run's own processes, in clock ticks: the finished ones (the shell's
# `times`) and the two servers still running.
cpu_end=$(stat_cpu)
servers=0
for p in $redis_pid $etcd_pid; do
	t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
	servers=$((servers + t))
done
times >"$work/times" # in this shell: in $(…) a subshell would report its own children only
export BENCH_CPU="$cpu_start $cpu_end $servers $(getconf CLK_TCK)" BENCH_OWN="$(tail -n 1 "$work/times")" \
	BENCH_QUIET_WAIT="$quiet_wait" BENCH_BUSY_START="$busy"
export BENCH_WORK="$work" BENCH_RSS_IDLE="$rss_idle" BENCH_RSS_OUT="$rss_out" \
	BENCH_ETCD_WHY="$etcd_why" BENCH_ETCD_VERSION="$etcd_version" BENCH_HANDOFFS="$handoffs" \
	BENCH_LOSSES="$losses" BENCH_CORES="$(nproc)" BENCH_KERNEL="$(uname -r)" \
	BENCH_GO="$(go version | awk '{print $3}')" \
	BENCH_REDIS="$(redis-server --version | sed 's/.* v=\([^ ]*\).*/\1/')"
python3 - <<'PY'
import json, math, os, datetime, statistics
E = os.environ
work = E["BENCH_WORK"]

def results(name):
    return {r["command"]: r for r in json.load(open(f"{work}/{name}.json"))["results"]}

def samples_ms(name):
    return sorted(int(l) / 1e6 for l in open(f"{work}/{name}.txt") if l.strip())

def pct(s, p):  # nearest rank
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]

def verdict(ok):
    return "**met**" if ok else "**missed**"

def merged(name, rounds):  # hyperfine results of several rounds of the same commands, as one
    out = {}
    for i in range(1, rounds + 1):
        for k, r in results(f"{name}-{i}").items():
            m = out.setdefault(k, {"times": [], "user": [], "system": []})
            m["times"] += r["times"]
            m["user"].append(r["user"])
            m["system"].append(r["system"])
    for m in out.values():
        t = m["times"]
        m["median"], m["mean"], m["stddev"] = statistics.median(t), statistics.mean(t), statistics.stdev(t)
        m["min"], m["max"] = min(t), max(t)
        m["user"], m["system"] = statistics.mean(m["user"]), statistics.mean(m["system"])
    return out

ov = merged("overhead", 3)
med = {k: v["median"] * 1000 for k, v in ov.items()}
print("# Benchmarks\n")
print(f"Made by `scripts/bench.sh > BENCHMARKS.md` on {datetime.date.today()}: {E['BENCH_CORES']} cores, "
      f"Linux {E['BENCH_KERNEL']}, {E['BENCH_GO']}, Redis {E['BENCH_REDIS']}"
      + (f", etcd {E['BENCH_ETCD_VERSION']}" if E["BENCH_ETCD_VERSION"] else "")
      + ", every server and the history file on this machine (ext4 or whatever `mktemp -d` gives). "
      "Medians throughout; a ratio is cronlock's figure over the other one's.\n")
import re
def secs(t):  # `times` output: 1m2.345s
    m = re.fullmatch(r"(\d+)m([\d.]+)s", t)
    return int(m.group(1)) * 60 + float(m.group(2))
c0b, c0t, c1b, c1t, servers, hz = (int(x) for x in E["BENCH_CPU"].split())
own = sum(secs(t) for t in E["BENCH_OWN"].split()) + servers / hz
others = max(0.0, (c1b - c0b) / hz - own)
avail = (c1t - c0t) / hz
share = 100 * others / avail if avail else 0
wait = int(E["BENCH_QUIET_WAIT"])
print(f"Other work on the machine: other processes used {others:.0f} of the {avail:.0f} CPU-seconds the "
      f"{E['BENCH_CORES']} cores had during this run ({share:.0f} %)"
      + (f", after waiting {wait} s for the CPU to calm down" if wait else "")
      + (". " if share <= 5 else
         f". **The machine was not quiet: other processes took CPU time from these runs, so every figure "
         f"below is slower and noisier than on an idle machine.** ")
      + "\n")

print("## Per-run overhead\n")
print("Wall time of one run of a `true` job (hyperfine -N: three rounds of 100 runs of every command, "
      "the second in reverse order, merged; 20 warm-up runs first).\n")
print("| command | median ms | mean ± σ ms | CPU ms (user + sys, mean) |")
print("|---|---|---|---|")
for k, v in ov.items():
    print(f"| {k} | {med[k]:.2f} | {v['mean']*1000:.2f} ± {v['stddev']*1000:.2f} | {(v['user'] + v['system'])*1000:.2f} |")
if E["BENCH_ETCD_WHY"]:
    print(f"| etcdctl lock | not available | {E['BENCH_ETCD_WHY']} | |")
f, w, r, l = med["flock -n FILE true"], med["bash + redis-cli wrapper"], med["cronlock redis"], med["cronlock local"]
print()
print(f"- cronlock redis / flock -n: **{r/f:.2f}×** (goal ≤ 3×: {verdict(r/f <= 3)})")
print(f"- cronlock local / flock -n: **{l/f:.2f}×**")
print(f"- cronlock redis / bash + redis-cli wrapper: **{r/w:.2f}×** (goal ≤ 0.4×: {verdict(r/w <= 0.4)})")
if "etcdctl lock" in med:
    e = med["etcdctl lock"]
    print(f"- cronlock redis / etcdctl lock: **{r/e:.2f}×** (goal ≤ 0.25×: {verdict(r/e <= 0.25)}); "
          f"cronlock local / etcdctl lock: **{l/e:.2f}×**")
else:
    print(f"- cronlock / etcdctl lock: not measured ({E['BENCH_ETCD_WHY']})")

tp = merged("throughput", 3)
tmed = {k: v["median"] for k, v in tp.items()}
fixed = (med["cronlock local"] - med["true (direct)"]) / 1000  # a run's own cost, seconds
print("\n## Output throughput\n")
print("`head -c 1G /dev/zero` (4 KiB writes) as the job, its stdout on `/dev/null` or on a pipe "
      "(`| cat >/dev/null`): direct, through one more `cat`, and through cronlock run (local lock, "
      "history on) with the default `--capture 64KiB` (output relayed through a pipe, the tail kept) "
      "and with `--capture 0` (the job writes to cronlock's stdout itself). hyperfine, three rounds "
      "of 5 runs (the second in reverse order) after 2 warm-up runs, shell spawn time subtracted.\n")
print("| stdout | command | median ms | GiB/s | min … max ms | CPU ms (user + sys, mean) |")
print("|---|---|---|---|---|---|")
for k, v in tp.items():
    sink, name = k.split(": ", 1)
    print(f"| {sink} | {name} | {tmed[k]*1000:.0f} | {1/tmed[k]:.2f} | {v['min']*1000:.0f} … {v['max']*1000:.0f} "
          f"| {(v['user'] + v['system'])*1000:.0f} |")
print()
for sink in ("null", "pipe"):
    d, c, cl, c0 = (tmed[f"{sink}: {n}"] for n in ("direct", "through cat", "cronlock", "cronlock --capture 0"))
    relay = c / cl
    eq = d / c0
    eq_net = d / (c0 - fixed)
    print(f"- stdout on {'/dev/null' if sink == 'null' else 'a pipe'}: cronlock relay throughput / `cat` relay: "
          f"**{relay:.2f}×** (goal ≥ 0.9×: {verdict(relay >= 0.9)}); `--capture 0` / direct: **{eq:.2f}×**, "
          f"**{eq_net:.2f}×** without the {fixed*1000:.1f} ms a run costs anyway (goal: equal, ≥ 0.95×: "
          f"{verdict(eq_net >= 0.95)})")

rss_idle, rss_out = int(E["BENCH_RSS_IDLE"]) / 1024, int(E["BENCH_RSS_OUT"]) / 1024
print("\n## Peak RSS of cronlock\n")
print("VmHWM of the cronlock process (Redis lock, history on), read every 5 ms until it exits.\n")
print(f"- while the job sleeps 1.5 s: **{rss_idle:.1f} MiB** (goal < 20 MiB: {verdict(rss_idle < 20)})")
print(f"- while the job writes 1 GiB to stdout (relayed, 64 KiB tail): **{rss_out:.1f} MiB** "
      f"(goal < 20 MiB: {verdict(rss_out < 20)})")

noop = json.load(open(f"{work}/noop.json"))["results"][0]["median"] * 1000
n = E["BENCH_HANDOFFS"]
print("\n## Lock hand-off\n")
print(f"A holder run's job prints a CLOCK_MONOTONIC stamp just before it exits; a `cronlock run --wait 30s` "
      f"started 40 ms earlier (for Redis: and subscribed to the release channel) is waiting for the same "
      f"key; its job prints a stamp as its `main` starts. The figure is the difference, {n} hand-offs per "
      f"backend, history on. It includes the holder cronlock reaping its child and releasing (its history "
      f"row is written on another goroutine meanwhile); the waiter waking, acquiring and claiming its per-run "
      f"history file; and starting the stamping "
      f"job, a static Go program (its fork + exec + exit alone take {noop:.2f} ms).\n")
print("| backend | p50 ms | p99 ms | min ms | max ms |")
print("|---|---|---|---|---|")
p50s = {}
for b in ("local", "redis"):
    s = samples_ms(f"handoff-{b}")
    p50s[b] = pct(s, 50)
    print(f"| {b} | {pct(s, 50):.2f} | {pct(s, 99):.2f} | {s[0]:.2f} | {s[-1]:.2f} |")
print()
for b in ("local", "redis"):
    print(f"- {b}: p50 {p50s[b]:.2f} ms (goal ≤ 5 ms: {verdict(p50s[b] <= 5)})")

s = samples_ms("lockloss")
bound = 3000 / 3 + 100
print("\n## Lock-loss detection\n")
print(f"`cronlock run --redis … --ttl 3s` (renewal every 1 s) runs a job that waits for SIGTERM. At a random "
      f"moment of a renewal period the lock key is deleted (`DEL`); the figure is the time from sending "
      f"the `DEL` to the job's SIGTERM handler running, {E['BENCH_LOSSES']} trials. cronlock sees the loss at "
      f"its next renewal, so the figure is spread over one renewal period.\n")
print(f"- p50 **{pct(s, 50):.0f} ms**, max **{s[-1]:.0f} ms**, min {s[0]:.0f} ms "
      f"(goal: max ≤ ttl/3 + 100 ms = {bound:.0f} ms: {verdict(s[-1] <= bound)})")

v, t = med["cronlock version (Go start-up floor)"], med["true (direct)"]
g = med["Go program doing nothing (static, no cgo)"]
print("\n## What limits these figures\n")
print(f"- Per-run overhead: a Go program that does nothing at all already takes {g:.2f} ms "
      f"({g/f:.2f}× `flock -n`, which also runs `true`), and starting cronlock's binary (`cronlock "
      f"version`) {v:.2f} ms ({v/f:.1f}×): the runtime and its threads, the dynamic loader (go-sqlite3 "
      "needs cgo), package initialisation (CPUID, which traps to the hypervisor on this VM, among it) "
      "and the page faults of a 16 MB binary. "
      f"So 3× `flock -n` leaves cronlock {3*f - v:.2f} ms beyond its own start-up for signal set-up, "
      f"the lock, the history, the guard and the job's own fork and exec ({t:.2f} ms for `true` alone). "
      "A run forks the job and, beside it, the guard process (a /bin/sh script), opens the history "
      "(on its own goroutine, while the lock is taken) and registers its signals (0.2–0.45 ms of round "
      "trips to Go's signal thread); what remains is CPU time shared by two cores (the CPU column: a "
      "cronlock run uses about as much CPU time as wall time, with two cores to spread it on).")
print("- The history's part of a short run: its start facts go to a per-run file before the job "
      "starts, and its one row is written when it ends (a run writes a `running` row only once it "
      "has lasted a second), on a goroutine of its own, while the lock is released. Opening SQLite "
      "recovers the WAL (each cronlock process is the file's first connection), which Open keeps "
      "short by checkpointing and truncating it past 200 pages; about one run in 30 pays for that "
      "checkpoint's two fsyncs (a few ms on this disk).")
print("- The bash + redis-cli wrapper forks redis-cli twice and `od`, `head`, `tr` for its token; "
      "cronlock's Redis work is two round trips on one connection (the acquire and release scripts, "
      "sent by SHA1; go-redis's HELLO is answered without a round trip: lockrun/redis/conn/handshake.go).")
if "etcdctl lock" in med:
    e, ev = med["etcdctl lock"], med["etcdctl version (its start-up floor)"]
    print(f"- etcdctl: `etcdctl version`, which talks to no server, takes {ev:.1f} ms of the {e:.1f} ms of "
          f"`etcdctl lock` — etcdctl's own start-up is most of its cost. 0.25× of it is {0.25*e:.1f} ms, "
          + (f"less than cronlock's Go start-up floor plus one fork and exec of the job ({v:.1f} + {t:.1f} ms) "
             "before any lock work: no run of this design reaches that goal here."
             if 0.25 * e < v + t else
             f"above cronlock's Go start-up floor plus one fork and exec of the job ({v:.1f} + {t:.1f} ms): "
             "the lock work, the guard and the history are what is over it."))
print("- Output relay: `perf record` of a 1 GiB relay puts almost all of the relay's CPU time in the kernel "
      "(pipe reads and writes, page freeing, scheduler), about as much as `cat` spends, with the copy into "
      "the 64 KiB tail near 1 % of its samples; compare the CPU column with the `cat` row. Wall time is "
      "then decided by how the writer, the relay and the reader (three busy processes) share two cores, "
      "which is also why the min … max spread of these rows is wide.")
print("- Lock hand-off: on the holder's side the release waits for the child's SIGCHLD, the reap, the hunt "
      "for leftover processes (one read of /proc/<pid>/task/<pid>/children, where the kernel puts orphans "
      "handed to a subreaper) and the guard's "
      "dismissal; the waiter is woken by inotify (local) or the release's PUBLISH (Redis), takes the lock, "
      "rewrites the lock record and forks the job, whose own start-up (the stamping program above) is "
      "part of the figure. With other work on the machine the p99 grows by tens to hundreds of ms "
      "while the p50 moves by a few: the tail is time spent waiting for a CPU.")
print("- The guard was cronlock's own binary executed again: a Go start-up of about 3.5 ms of CPU "
      "per run on the same two cores as the job; a fixed /bin/sh script costs about 0.65 ms (perf stat) "
      "and took about 1 ms off the median run. Tried, measured side by side and not kept: a guard that "
      "is a fork of cronlock running raw system calls (less CPU than executing cronlock, but 0.5 ms "
      "more wall time: the page-table copy and copy-on-write faults land in cronlock itself); forking the guard before the lock is taken; idle Redis "
      "connections opened early (twice; the second time a dial, HELLO and PING while the signals were "
      "registered, for 0.1 ms); WAL checkpoints at 50, 100 or 400 pages instead of 200 (no "
      "difference beyond noise); batching the relay's reads with sleeps; static linking (breaks user "
      "lookups through NSS); prometheus/client_golang for the metrics file (its package init costs "
      "about 1 ms in every cronlock process, with or without --metrics-dir, so the text format is "
      "written by hand and checked against Prometheus's parser in the tests).")
print("- Found with perf and removed: listing /proc/<pid>/task to find leftover processes filled the "
      "dentry cache with an entry per thread, which the kernel walks when cronlock's parent reaps it: "
      "a fifth of all CPU time of a `cronlock run -- true` loop, spent in cron's (or hyperfine's) "
      "wait4.")
print("- Lock-loss detection: cronlock does not watch the key (Redis sends no notice of a deletion unless "
      "keyspace notifications are configured), so it learns of the loss at its "
      "next renewal: the figure is spread evenly over one renewal period (ttl/3), plus one round trip and "
      "the signal delivery.")
PY

# 6. Output to a file and a reader that goes away: its own section (see output_files above).
output_files

# 7. History at scale: its own section of the report (see history_scale above).
history_scale

# 8. The report at 10,000 runs: its own section (see report_bench above).
report_bench
