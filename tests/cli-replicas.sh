#!/bin/sh
# cli-replicas.sh -- the replica recipe (dist/haproxy.cfg, hearth-replicas(7)):
# tests/replicas.py puts HAProxy with the recipe in front of two hearth
# serve instances on loopback and checks session affinity, prefix affinity
# of multi-turn chats (against round robin) and failover while an instance
# drains.  Skipped where HAProxy, python3 or the server are missing, unless
# CI is set.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

require_data models/stories260K.gguf
command -v python3 >/dev/null 2>&1 || unavailable "python3 is not installed"
haproxy=$(command -v haproxy || ls /usr/sbin/haproxy 2>/dev/null || :)
[ -n "$haproxy" ] || unavailable "HAProxy is not installed (Debian: apt-get install haproxy)"
"$HEARTH" serve --help 2>&1 | grep -qi 'no HTTP server' && unavailable "hearth serve is not available"
"$haproxy" -c -f "$HEARTH_SRCDIR/dist/haproxy.cfg" >"$tmpdir/check" 2>&1 &&
    pass "dist/haproxy.cfg is a valid HAProxy configuration" ||
    { fail "dist/haproxy.cfg is a valid HAProxy configuration"; sed 's/^/  /' "$tmpdir/check" >&2; }
if python3 "$HEARTH_SRCDIR/tests/replicas.py" "$haproxy" "$HEARTH"; then
    pass "two instances behind the recipe"
else
    fail "two instances behind the recipe"
fi
finish
