// Package releasetest tests what scripts/release.sh makes, as a sysadmin would use it:
// the static binaries in an empty root (no libc, no /etc, no shell), the arm64 build under
// qemu-user-static, the .deb installed into a private root with dpkg --root (man pages,
// completions, the conffile kept by dpkg -r and removed by --purge, the machine itself left
// as it was), the README's fleet recipe run by the installed binary on two such roots (each
// the / of its host through unshare -r chroot) against a private Redis with a password, the
// .rpm installed into a throwaway root with rpm --root (its files, their modes, the
// binaries run), the checksums, what the binary links, and users that only getent knows.
//
// Its tests build the release once per run, both architectures when the arm64 cross
// compiler is there (about 45 s with a warm Go build cache; cold, on two cores, about
// 3 minutes for amd64 and 5 more for arm64, go-sqlite3 and the etcd client being compiled
// once per C toolchain), and run only where the release toolchain is installed (musl-gcc,
// dpkg, rpm, man, unshare, chroot, redis-server); scripts/test.sh installs it, and under
// CI=true a missing tool fails the tests instead of skipping them. It has no code of its
// own.
package releasetest
