#!/bin/sh
# cli-symbols.sh -- the shared library exports exactly the functions that
# hearth.h declares: every declaration is defined and exported, and no
# internal function leaks out.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

lib="$HEARTH_BUILDDIR/src/.libs/libhearth.so"
if [ ! -f "$lib" ] || ! command -v nm >/dev/null 2>&1; then
    echo "SKIP: no shared library or no nm in this build" >&2
    exit 77
fi
sed -n 's/^[A-Za-z].*[ *]\(hearth_[a-z0-9_]*\)(.*/\1/p' "$HEARTH_SRCDIR/src/hearth.h" | LC_ALL=C sort -u > "$tmpdir/declared"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBR]$/ { print $3 }' | grep -v '^_' | LC_ALL=C sort -u > "$tmpdir/exported"
[ -s "$tmpdir/declared" ] || fail "no declarations found in hearth.h"
missing=$(LC_ALL=C comm -23 "$tmpdir/declared" "$tmpdir/exported")
extra=$(LC_ALL=C comm -13 "$tmpdir/declared" "$tmpdir/exported")
[ -z "$missing" ] && pass "every declared function is exported" || fail "declared but not exported: $missing"
[ -z "$extra" ] && pass "nothing else is exported" || fail "exported but not declared: $extra"

# The Debian symbols file (in the source tree, not in the tarball) lists
# the same functions; dpkg-gensymbols fails the package build otherwise.
symfile="$HEARTH_SRCDIR/debian/libhearth0.symbols"
if [ -f "$symfile" ]; then
    sed -n 's/^ \(hearth_[a-z0-9_]*\)@Base .*/\1/p' "$symfile" | LC_ALL=C sort -u > "$tmpdir/packaged"
    unlisted=$(LC_ALL=C comm -23 "$tmpdir/exported" "$tmpdir/packaged")
    stale=$(LC_ALL=C comm -13 "$tmpdir/exported" "$tmpdir/packaged")
    [ -z "$unlisted" ] && pass "debian/libhearth0.symbols lists every export" || fail "exported but missing from debian/libhearth0.symbols: $unlisted"
    [ -z "$stale" ] && pass "debian/libhearth0.symbols lists nothing else" || fail "in debian/libhearth0.symbols but not exported: $stale"
fi
finish
