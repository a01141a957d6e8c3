#!/usr/bin/env bash
# Builds a cronlock release: one command, from a clean git tree.
#
#   scripts/release.sh [--out DIR] [--arch amd64|arm64|all] [--allow-dirty]
#
# Writes into DIR (default dist/):
#   cronlock-VERSION-linux-ARCH, cronlock-etcd-VERSION-linux-ARCH   static binaries that run
#       on any glibc or none (Debian 11, RHEL 8, a distroless image): go-sqlite3 stays (cgo),
#       linked statically against musl (amd64: Debian's musl-tools) or glibc (arm64:
#       Debian's gcc-aarch64-linux-gnu and libc6-dev-arm64-cross; Debian has no musl cross
#       compiler). Built with -tags osusergo,netgo, so that no glibc NSS code is needed at
#       run time (a static binary cannot load NSS modules; users from LDAP/SSSD are then
#       found through `getent passwd`, package userdb), and sqlite_omit_load_extension (no
#       dlopen);
#   cronlock_VERSION_ARCH.deb, cronlock-VERSION-1.ARCH.rpm   made with nfpm
#       (scripts/package/nfpm.yaml): both binaries in /usr/bin, the conffile
#       /etc/cronlock/cronlock.conf (0644), bash/zsh/fish completions written by the binary
#       itself, the man pages (scripts/mangen, rendered here, gzipped), README and LICENSE;
#   SHA256SUMS   of everything above (`sha256sum -c SHA256SUMS`).
#
# VERSION is `git describe --tags` (v0.3.1 on a tagged commit; v0.0.0-g<commit> where the
# history has no tag yet), stamped in with -ldflags -X with the commit. A tree with
# uncommitted changes is refused (the binary would name a commit it was not built from)
# unless --allow-dirty, which the release tests use; the version then ends in -dirty.
#
# Needs: Go, gcc, musl-tools (amd64), gcc-aarch64-linux-gnu and libc6-dev-arm64-cross
# (arm64); installs the missing ones with apt-get when run as root. nfpm v2.45.2 runs with
# `go run` from the module proxy: it is a build tool and never linked into cronlock, nor
# is the man page generator (the release test checks both with `go version -m`).
# Takes about 3 minutes on two cores the first time (go-sqlite3 compiled once per C
# toolchain), a few seconds more with a warm Go build cache.
set -euo pipefail
cd "$(dirname "$0")/.."

out=dist
arch=all
allow_dirty=
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=$2; shift 2 ;;
	--arch) arch=$2; shift 2 ;;
	--allow-dirty) allow_dirty=1; shift ;;
	*) echo "usage: scripts/release.sh [--out DIR] [--arch amd64|arm64|all] [--allow-dirty]" >&2; exit 2 ;;
	esac
done
case "$arch" in
amd64 | arm64) arches=$arch ;;
all) arches="amd64 arm64" ;;
*) echo "release.sh: --arch $arch: want amd64, arm64 or all" >&2; exit 2 ;;
esac

dirty=
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	if [ -z "$allow_dirty" ]; then
		echo "release.sh: the tree has uncommitted changes; commit them (or give --allow-dirty for a test build)" >&2
		exit 1
	fi
	dirty=-dirty
fi
commit=$(git rev-parse HEAD)
version=$(git describe --tags --match 'v[0-9]*' 2>/dev/null || echo "v0.0.0-g$(git rev-parse --short=12 HEAD)")$dirty
date=$(git log -1 --format=%cs HEAD)
# The packages' version: nfpm reads semver; a pre-release (-...) becomes ~... in the .deb.
pkgversion=${version#v}

# Each static build's C compiler and the Debian package that provides it.
cc_for() { case "$1" in amd64) echo musl-gcc ;; arm64) echo aarch64-linux-gnu-gcc ;; esac; }
pkgs_for() { case "$1" in amd64) echo musl-tools ;; arm64) echo "gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; esac; }
for a in $arches; do
	command -v "$(cc_for "$a")" >/dev/null 2>&1 && continue
	if [ "$(id -u)" != 0 ]; then
		echo "release.sh: $(cc_for "$a") is missing; run as root, or apt-get install $(pkgs_for "$a")" >&2
		exit 1
	fi
	echo "release.sh: installing $(pkgs_for "$a") with apt-get" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2046 # one package a word
	apt-get install -y -qq --no-install-recommends $(pkgs_for "$a") >/dev/null
done

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# build ARCH TAGS NAME: one static binary.
build() {
	local a=$1 tags=$2 name=$3
	echo "release.sh: building $name ($version, linux/$a, static)" >&2
	CGO_ENABLED=1 GOOS=linux GOARCH=$a CC=$(cc_for "$a") \
		go build -trimpath -buildvcs=false -tags "osusergo,netgo,sqlite_omit_load_extension$tags" \
		-ldflags "-s -w -X cronlock/cmd.version=$version -X cronlock/cmd.commit=$commit -linkmode external -extldflags -static" \
		-o "$out/$name" .
}

# Man pages: rendered once (they do not depend on the architecture), with the etcd flags.
echo "release.sh: man pages" >&2
go run -tags etcd ./scripts/mangen -out "$work/man" -date "$date" -version "$version"
mkdir -p "$work/man/man1" "$work/man/man5"
mv "$work"/man/*.1 "$work/man/man1/"
mv "$work"/man/*.5 "$work/man/man5/"
gzip -9n "$work"/man/man1/* "$work"/man/man5/*

# Docs in /usr/share/doc/cronlock laid out as in the repository, so that their links work:
# README, LICENSE and BENCHMARKS at the top, the reference pages (and the report's picture)
# in docs/.
mkdir -p "$work/doc/docs" "$work/pkg"
cp README.md LICENSE BENCHMARKS.md "$work/doc/"
[ ! -d docs ] || find docs -maxdepth 1 \( -name '*.md' -o -name '*.png' \) -exec cp {} "$work/doc/docs/" \;

files=()
for a in $arches; do
	build "$a" "" "cronlock-$version-linux-$a"
	build "$a" ",etcd" "cronlock-etcd-$version-linux-$a"
	files+=("cronlock-$version-linux-$a" "cronlock-etcd-$version-linux-$a")

	stage=$work/stage-$a
	mkdir -p "$stage/completion"
	cp "$out/cronlock-$version-linux-$a" "$stage/cronlock"
	cp "$out/cronlock-etcd-$version-linux-$a" "$stage/cronlock-etcd"
	ln -s "$work/man" "$work/doc" "$stage/"
	# Completions come from a binary that runs here: this machine's own build.
	host=$out/cronlock-$version-linux-$(go env GOARCH)
	[ -x "$host" ] || host=$work/cronlock-host
	[ -x "$host" ] || go build -trimpath -o "$host" .
	"$host" completion bash >"$stage/completion/cronlock.bash"
	"$host" completion zsh >"$stage/completion/_cronlock"
	"$host" completion fish >"$stage/completion/cronlock.fish"

	# nfpm expands no variables in file paths: fill them in here.
	sed -e "s|\${STAGE}|$stage|g" -e "s|\${ARCH}|$a|g" -e "s|\${VERSION}|$pkgversion|g" \
		scripts/package/nfpm.yaml >"$work/nfpm-$a.yaml"
	for packager in deb rpm; do
		echo "release.sh: $packager for $a" >&2
		go run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2 package --config "$work/nfpm-$a.yaml" \
			--packager "$packager" --target "$work/pkg/" >"$work/nfpm.log" 2>&1 || { cat "$work/nfpm.log" >&2; exit 1; }
	done
done
# The packages are made apart and moved, so that SHA256SUMS names this release's alone
# (not an older one's left in the same folder).
for f in "$work"/pkg/*; do
	mv -f "$f" "$out/"
	files+=("$(basename "$f")")
done
(cd "$out" && sha256sum "${files[@]}" >SHA256SUMS)
echo "release.sh: $version in $out:" >&2
(cd "$out" && ls -l "${files[@]}" SHA256SUMS) >&2
