# Sourced by scripts/bench.sh for `scripts/bench.sh etcd [REV]` (it needs bench.sh's $work,
# free_port and apt_install): what a short run costs on etcd, against `etcdctl lock`.
#   - a 3-member etcd cluster on free loopback ports, data (and its fsync'd WALs) in $work;
#   - the etcd build of cronlock from the working tree (and from git revision REV when
#     given, for an A/B of two builds);
#   - per run, the requests each build sends (etcd's grpc_server_msg_received_total, summed
#     over the members, by method), for `run -- true` with and without `--schedule`;
#   - hyperfine medians, in six interleaved rounds of 30 runs with the order alternating:
#     `etcdctl version` (its start-up floor), `etcdctl lock K true`, `cronlock version` (the
#     etcd build's start-up floor), `cronlock run -k K -- true` and with `--schedule` (the
#     history on, in $work; each --schedule run claims a new tick: the tick record is
#     deleted before every run of both kinds, as `tick` does for Redis).
# Prints a Markdown section on stdout, in about two minutes.
etcd_bench() {
	local rev=${1:-} m names=(e1 e2 e3) cluster="" ep="" ports=() pids=()
	if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
		apt_install etcd-server etcd-client
	fi
	for m in 0 1 2; do
		ports+=("$(free_port)" "$(free_port)")
		cluster+="${cluster:+,}${names[m]}=http://127.0.0.1:${ports[2 * m + 1]}"
		ep+="${ep:+,}http://127.0.0.1:${ports[2 * m]}"
	done
	for m in 0 1 2; do
		etcd --name "${names[m]}" --data-dir "$work/etcd-${names[m]}" \
			--listen-client-urls "http://127.0.0.1:${ports[2 * m]}" --advertise-client-urls "http://127.0.0.1:${ports[2 * m]}" \
			--listen-peer-urls "http://127.0.0.1:${ports[2 * m + 1]}" --initial-advertise-peer-urls "http://127.0.0.1:${ports[2 * m + 1]}" \
			--initial-cluster "$cluster" --initial-cluster-state new >"$work/etcd-${names[m]}.log" 2>&1 &
		pids+=($!)
		etcd_pid+=" $!" # bench.sh's cleanup stops them
	done
	for _ in $(seq 100); do
		etcdctl --endpoints="$ep" endpoint health >/dev/null 2>&1 && break
		sleep 0.1
	done
	etcdctl --endpoints="$ep" endpoint health >&2
	go build -tags etcd -trimpath -o "$work/cronlock-etcd" .
	local builds=(new)
	if [ -n "$rev" ]; then
		git worktree add -q --detach "$work/old-src" "$rev"
		(cd "$work/old-src" && go build -tags etcd -trimpath -o "$work/cronlock-etcd-old" .)
		git worktree remove --force "$work/old-src"
		builds+=(old)
	fi
	export CRONLOCK_CONFIG="$work/none.conf" CRONLOCK_HISTORY="$work/etcd-history.db" CRONLOCK_BACKEND=etcd \
		CRONLOCK_ETCD_ENDPOINTS="$ep" CRONLOCK_NODE=bench
	local bin_new="$work/cronlock-etcd" bin_old="$work/cronlock-etcd-old"
	# Requests per run, on the wire: every member's counters before and after.
	received() {
		local p
		for m in 0 1 2; do
			curl -s "http://127.0.0.1:${ports[2 * m]}/metrics"
		done | awk -F'[",{} ]+' '/^grpc_server_msg_received_total/ {
			for (i = 1; i < NF; i++) if ($i == "grpc_method=") m = $(i + 1)
			n[m] += $NF } END { for (m in n) print m, n[m] }' | sort
	}
	requests() { # NAME COMMAND...: one run of COMMAND, its requests by method into $work/req-NAME
		local name=$1
		shift
		received >"$work/req-a"
		"$@" >/dev/null
		received >"$work/req-b"
		join "$work/req-a" "$work/req-b" | awk '$3 != $2 {printf "%s %d\n", $1, $3 - $2}' >"$work/req-$name"
	}
	etcdctl --endpoints="$ep" lock bench-warm true >/dev/null
	requests etcdctl etcdctl --endpoints="$ep" lock bench-req true
	local b bin
	for b in "${builds[@]}"; do
		bin="bin_$b"
		"${!bin}" run -k bench-req -- true
		requests "$b-plain" "${!bin}" run -k bench-req -- true
		etcdctl --endpoints="$ep" del --prefix "cronlock:{bench-req}:tick" >/dev/null
		requests "$b-tick" "${!bin}" run -k bench-req --schedule '* * * * *' -- true
	done
	echo "bench.sh: etcd: six rounds of hyperfine on a 3-member cluster" >&2
	local ecmds=(-n 'etcdctl version' 'etcdctl version'
		-n 'etcdctl lock' "etcdctl --endpoints=$ep lock bench-k true")
	for b in "${builds[@]}"; do
		bin="bin_$b"
		ecmds+=(-n "cronlock-$b version" "${!bin} version"
			-n "cronlock-$b run" "${!bin} run -k bench-k -- true"
			-n "cronlock-$b run --schedule" "${!bin} run -k bench-t --schedule '* * * * *' -- true")
	done
	local prep="etcdctl --endpoints=$ep del --prefix 'cronlock:{bench-t}:tick' >/dev/null"
	for round in 1 2 3 4 5 6; do
		if [ $((round % 2)) = 0 ]; then
			reverse_commands ecmds
		else
			reversed=("${ecmds[@]}")
		fi
		hyperfine --shell sh --warmup 3 --runs 30 --prepare "$prep" --export-json "$work/etcd-$round.json" "${reversed[@]}" >&2
	done
	BENCH_WORK="$work" BENCH_BUILDS="${builds[*]}" BENCH_REV="$rev" BENCH_ETCD_VERSION="$(etcd --version | awk '/etcd Version/ {print $3}')" python3 - <<'PY'
import json, os, statistics
work, builds = os.environ["BENCH_WORK"], os.environ["BENCH_BUILDS"].split()
times = {}
for r in range(1, 7):
    for res in json.load(open(f"{work}/etcd-{r}.json"))["results"]:
        times.setdefault(res["command"], []).extend(res["times"])
med = {k: statistics.median(v) * 1000 for k, v in times.items()}
def req(name):
    rows = [l.split() for l in open(f"{work}/req-{name}") if l.strip()]
    return sum(int(n) for _, n in rows), ", ".join(f"{m} {n}" for m, n in rows)
print(f"## etcd: a short run against `etcdctl lock` (3 members, etcd {os.environ['BENCH_ETCD_VERSION']})\n")
print("`scripts/bench.sh etcd" + (" " + os.environ["BENCH_REV"] if os.environ["BENCH_REV"] else "") +
      "`: a 3-member cluster on loopback, medians of 180 runs each (six interleaved rounds), "
      "the history on; the requests of one run as etcd counted them (all members).\n")
print("| command | median ms | requests per run |")
print("|---|---|---|")
n, what = req("etcdctl")
rows = [("etcdctl version", "etcdctl version", ""), ("etcdctl lock K true", "etcdctl lock", f"{n}: {what}")]
for b in builds:
    label = "this build" if b == "new" else f"build of {os.environ['BENCH_REV']}"
    rows.append((f"cronlock version ({label})", f"cronlock-{b} version", ""))
    for kind, cmd in (("plain", "run"), ("tick", "run --schedule")):
        n, what = req(f"{b}-{kind}")
        rows.append((f"cronlock {cmd} -- true ({label})", f"cronlock-{b} {cmd}", f"{n}: {what}"))
for title, key, r in rows:
    print(f"| `{title}` | {med[key]:.1f} | {r} |")
e = med["etcdctl lock"]
print()
for b in builds:
    label = "this build" if b == "new" else f"the build of {os.environ['BENCH_REV']}"
    for cmd in ("run", "run --schedule"):
        ratio = med[f"cronlock-{b} {cmd}"] / e
        print(f"- `cronlock {cmd}` ({label}) / `etcdctl lock`: **{ratio:.2f}×** (goal ≤ 0.5×: {'met' if ratio <= 0.5 else 'NOT met'})")
PY
}
