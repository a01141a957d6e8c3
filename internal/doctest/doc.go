// Package doctest holds only tests, of the documentation: they read README.md,
// CONTRIBUTING.md and docs/*.md, run every command block the docs mark runnable against a
// freshly built cronlock, and check the docs' links, size and wording, so that the docs
// cannot drift from the program. It is a package of its own so that these tests run in
// parallel with cmd's.
package doctest
