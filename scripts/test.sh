#!/usr/bin/env bash
# Runs cronlock's whole test suite against a real, private redis-server.
#
#   scripts/test.sh              the suite: what CI runs (.ci/run), and must pass every time
#   scripts/test.sh --long       the suite, then a long fuzz run of every Fuzz target
#   scripts/test.sh ARGS...      go test -race ARGS ./... only (e.g. -run Local, -short)
#
# Needs: Go with cgo (gcc) for go-sqlite3. Installs redis-server (its package brings
# redis-cli, which the Cluster tests use to create a cluster; Sentinels are redis-server
# --sentinel), Debian's cron, tzdata, etcd-server and chromium (no service started), with apt-get
# when they are missing (as root). Starts Redis on a free loopback port with its data in a temporary
# folder, exports CRONLOCK_TEST_REDIS_ADDR for the tests, runs `go test -race ./...`
# (extra arguments are passed to go test), then the etcd backend's tests with the etcd
# build tag (each starts its own etcd), and stops Redis whatever happens. The Fuzz
# targets' seeds (f.Add and every input saved in testdata/fuzz, failing ones included)
# run as plain tests in `go test`; fuzzing itself, whose random inputs must never decide
# whether a change lands, runs only with --long.
set -euo pipefail
cd "$(dirname "$0")/.."

long=
if [ "${1:-}" = --long ]; then
	shift
	long=1
	if [ $# -gt 0 ]; then
		echo "test.sh: --long runs the whole suite and then fuzzes; it takes no other arguments" >&2
		exit 2
	fi
	# The takeover torture's Sentinel failover round: a minute more of cmd, kept out of CI.
	export CRONLOCK_TAKEOVER_SENTINEL=1
	# The arm64 release build (about 5 minutes more on two cores, cold): out of CI too.
	export CRONLOCK_TEST_RELEASE_ARM64=1
fi

# install_quietly PKG... installs Debian packages without starting their services: a
# policy-rc.d that says 101 stops a package's postinst from starting one where there is no
# systemd (the tests start their own servers). apt's lists are fetched once a run, by the
# first install; what apt and dpkg say goes to a log, shown only when the install fails.
apt_updated=
install_quietly() {
	local policy_added= log
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		policy_added=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	log=$(mktemp)
	if ! { { [ -n "$apt_updated" ] || apt-get update -qq; } && apt_updated=1 &&
		apt-get install -y -qq --no-install-recommends "$@"; } >"$log" 2>&1; then
		echo "test.sh: apt-get could not install $*; what it said:" >&2
		cat "$log" >&2
		rm -f "$log"
		[ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
		exit 1
	fi
	rm -f "$log"
	[ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
}

if ! command -v redis-server >/dev/null 2>&1; then
	echo "test.sh: redis-server is missing; installing it with apt-get (not started as a service)" >&2
	if [ "$(id -u)" != 0 ]; then
		echo "test.sh: run as root, or install redis-server yourself (apt-get install redis-server)" >&2
		exit 1
	fi
	install_quietly redis-server
fi

# Debian's cron, for the test that runs a wrapped crontab under a real daemon (it starts
# its own `cron -f` and stops it).
if [ ! -x /usr/sbin/cron ] && [ "$(id -u)" = 0 ]; then
	echo "test.sh: installing Debian's cron (not started as a service)" >&2
	install_quietly cron
fi

# The system's tzdata: the schedule package's ticks are compared with a model of Debian's
# cron in every zone it has (Go's embedded copy is no stand-in: cron reads these files).
if [ ! -e /usr/share/zoneinfo/Europe/Berlin ] && [ "$(id -u)" = 0 ]; then
	echo "test.sh: installing tzdata" >&2
	install_quietly tzdata
fi

# The release toolchain, installed when missing (as root), for scripts/releasetest, which
# builds the release once (about 45 s warm, 3 minutes cold on two cores for amd64) and
# installs the .deb and the .rpm into private roots: musl-gcc for the static amd64 build,
# man-db for `man -w`, rpm for `rpm -i --root`; with --long also the arm64 cross compiler
# with a static glibc and qemu-user-static to run the arm64 build. One apt-get call.
if [ "$(id -u)" = 0 ]; then
	tools="musl-gcc:musl-tools man:man-db rpm:rpm"
	[ -z "$long" ] || tools="$tools aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu qemu-aarch64-static:qemu-user-static"
	missing=()
	for tool in $tools; do
		command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
	done
	[ -z "$long" ] || [ -e /usr/aarch64-linux-gnu/lib/libc.a ] || missing+=(libc6-dev-arm64-cross)
	if [ ${#missing[@]} -gt 0 ]; then
		echo "test.sh: installing ${missing[*]} for the release tests" >&2
		install_quietly "${missing[@]}"
	fi
fi

# Debian's etcd-server, for the etcd backend's tests (each starts a private etcd on free
# ports).
if ! command -v etcd >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	echo "test.sh: installing Debian's etcd-server (not started as a service)" >&2
	install_quietly etcd-server
fi

# Debian's chromium, for the report's test: a real headless browser loads the page it
# writes (no network: the test maps every name to nowhere).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	echo "test.sh: installing Debian's chromium (headless, for the report's test)" >&2
	install_quietly chromium
fi

workdir=$(mktemp -d)
redis_pid=
cleanup() {
	if [ -n "$redis_pid" ]; then
		kill "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	rm -rf "$workdir"
}
trap cleanup EXIT

# A free port: ask the kernel for one, then hand it to redis-server. Retry if another
# process takes it in between.
for attempt in 1 2 3 4 5; do
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		shuf -i 20000-60000 -n 1)
	redis-server --port "$port" --bind 127.0.0.1 --dir "$workdir" --save "" --appendonly no \
		--daemonize no --logfile "$workdir/redis.log" &
	redis_pid=$!
	for _ in $(seq 1 100); do
		if redis-cli -p "$port" ping >/dev/null 2>&1; then break 2; fi
		kill -0 "$redis_pid" 2>/dev/null || break
		sleep 0.05
	done
	kill "$redis_pid" 2>/dev/null || true
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=
done
if [ -z "$redis_pid" ]; then
	echo "test.sh: could not start redis-server; its log:" >&2
	cat "$workdir/redis.log" >&2 || true
	exit 1
fi
echo "test.sh: redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port" >&2

export CRONLOCK_TEST_REDIS_ADDR="127.0.0.1:$port"
go vet ./...
# -timeout is per package and only catches a hang: cmd's binary tests take about 15 minutes
# under -race on two cores, so 22 minutes leaves room for a slower machine (the whole
# script stays within CI's 25-minute goal only on a machine as fast as that).
go test -race -count=1 -timeout 22m "$@" ./...

# With arguments (e.g. -run Local) only the tests asked for run: no etcd step, no fuzzing.
[ $# -eq 0 ] || exit 0

# The etcd backend's tests, again with the etcd build tag: the packages whose files
# differ with the tag (cmd links etcd only with it, and its tests' cronlock binary is
# built with it too; the backend's own code may have the tag or not). Only the tests
# that use etcd run again; under CI=true a missing etcd fails them.
files='{{.ImportPath}} {{.GoFiles}} {{.CgoFiles}} {{.TestGoFiles}} {{.XTestGoFiles}}'
etcd_pkgs=$(diff <(go list -f "$files" ./...) <(go list -tags etcd -f "$files" ./...) |
	sed -n 's/^> \([^ ]*\) .*/\1/p' | sort -u || true)
if [ -z "$etcd_pkgs" ]; then
	echo "test.sh: no package changes with the etcd build tag; no etcd step" >&2
else
	echo "test.sh: etcd step, with -tags etcd:" $etcd_pkgs >&2
	go vet -tags etcd ./...
	# shellcheck disable=SC2086 # one package a word
	go test -race -count=1 -timeout 12m -tags etcd -run 'Etcd' $etcd_pkgs
fi

[ -n "$long" ] || exit 0

# --long: fuzz every Fuzz target, in every package that has one (found by their source,
# so new packages need no edit here). Go fuzzes one target per run: `go test -c -fuzz .`
# builds one instrumented test binary per package, which then fuzzes each of its
# targets in turn, without -race. The budget is a count of inputs, not a duration: with
# go1.26 a `-fuzztime 3s` run can fail at its deadline with a bare "context deadline
# exceeded" (go.dev/issue/75804). FUZZ_INPUTS sets it (default 100000; a target that
# writes a file or SQLite each input gets a tenth). A failing input is written to
# <pkg>/testdata/fuzz/<target>/ (commit it: it becomes a seed that every run checks);
# every target is fuzzed whatever the others found, and the failures are listed at the end.
fuzz_inputs() {
	local n=${FUZZ_INPUTS:-100000}
	case "$1" in
	FuzzConfigFile | FuzzHistoryRender | FuzzRunJSON | FuzzStoreRoundTrip | FuzzScanRow) echo $((n / 10 > 0 ? n / 10 : 1)) ;;
	*) echo "$n" ;;
	esac
}
fuzz_dirs=$(grep -rlE --include='*_test.go' '^func Fuzz[A-Z0-9_]' . | xargs -n1 dirname | sed 's|^\./||' | sort -u)
[ -n "$fuzz_dirs" ] || { echo "test.sh: no Fuzz targets found" >&2; exit 1; }
failed=()
for dir in $fuzz_dirs; do
	bin="$workdir/$(echo "$dir" | tr / _).fuzz"
	go test -c -fuzz . -o "$bin" "./$dir"
	targets=$(cd "$dir" && "$bin" -test.list '^Fuzz')
	[ -n "$targets" ] || { echo "test.sh: no fuzz targets in ./$dir" >&2; exit 1; }
	for target in $targets; do
		echo "test.sh: fuzzing ./$dir $target ($(fuzz_inputs "$target") inputs)" >&2
		# cd: the fuzzer reads and writes testdata/fuzz in the package's folder.
		if ! (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^$target\$" \
			-test.fuzztime "$(fuzz_inputs "$target")x" -test.fuzzcachedir "$(go env GOCACHE)/fuzz/cronlock/$dir" 2>&1 |
			{ grep -v '^fuzz: elapsed' || true; }); then
			failed+=("./$dir $target")
		fi
	done
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "test.sh: fuzzing found failures (inputs saved under each package's testdata/fuzz/):" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "test.sh: fuzzing done, nothing found" >&2
