#!/usr/bin/env python3
"""soak.py -- bounded soak test of an OpenAI-compatible completion server.

For --duration seconds (default 600) --clients clients (default 32) send
valid requests with random prompt lengths, random max_tokens, streaming or
not, to /v1/completions and /v1/chat/completions, and give up on a share
of them at random: closing the socket while waiting for the response,
after some chunks of a stream, in the middle of a non-streaming body, or
half-way through sending the request.  Beside them --bad-clients threads
send malformed requests: bad JSON, JSON of the wrong shape, fields of the
wrong type or range, bodies over the size limit, wrong methods and paths,
truncated HTTP, garbage bytes, broken headers, idle connections, HTTP/1.1
framing violations (RFC 9112: conflicting lengths, unknown transfer
codings, absurd chunk sizes, folded headers) and oversized grammars and
schemas.  --slow-clients threads hold connections that send a request
head one byte a second (reconnecting whenever the server drops them),
and a probe thread measures the latency of /health and of a small
completion throughout; run once with --slow-clients 0 --bad-clients 0 for
the latency without attackers.

At the end it checks that
  - the server is alive and answers /health and a plain request;
  - every complete request was answered (2xx, with a well-formed body or
    stream) or refused with a 4xx/5xx status and an OpenAI error object
    {"error": {"message": ..., "type": ...}}; 500s count as violations;
  - /metrics hearth_kv_blocks_used is back to the value it had before the
    load (once hearth_requests_running and _waiting are 0);
  - every framing violation and every oversized grammar got a status
    line (no silence until a timeout), and every latency probe an answer
    within --probe-timeout;
and with --server-cmd (which it starts itself, {port} replaced by a free
port, its stderr captured to --server-log): that requests running at
SIGTERM are finished or ended with an error event, that the server exits
with status 0, and that its output holds no sanitizer report
("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer").

Statuses that differ from what the hearth serve interface specifies (e.g.
405 for a wrong method, 413 for a body over --max-body) are listed as
mismatches; --strict makes them violations too.  Exit status: 0 when there
is no violation, 1 otherwise, 2 for a usage or start-up error.

Example:
  tools/soak.py --duration 120 --server-cmd \\
    "exec src/hearth serve -m stories260K.gguf --chat-template chatml --port {port}"

Traffic goes only to the --url given (default 127.0.0.1); every loop is
bounded by --duration and every socket by --timeout.  Python 3 standard
library only.
"""

import argparse
import http.client
import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer")


class Stats:
    """Thread-safe tallies of outcomes, violations and mismatches."""

    def __init__(self):
        self.lock = threading.Lock()
        self.outcomes = {}      # (group, label) -> count
        self.violations = []    # (what, detail)
        self.n_violations = {}  # what -> count
        self.mismatches = {}    # what -> [count, example]

    def count(self, group, label):
        with self.lock:
            k = (group, label)
            self.outcomes[k] = self.outcomes.get(k, 0) + 1

    def violation(self, what, detail):
        with self.lock:
            self.n_violations[what] = self.n_violations.get(what, 0) + 1
            if self.n_violations[what] <= 5:
                self.violations.append((what, detail))

    def mismatch(self, what, detail):
        with self.lock:
            m = self.mismatches.setdefault(what, [0, detail])
            m[0] += 1


class Target:
    def __init__(self, url, api_key, timeout):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http":
            raise ValueError("--url must be http://HOST:PORT")
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.timeout = timeout
        self.auth = {"Authorization": "Bearer " + api_key} if api_key else {}
        self.auth_line = ("Authorization: Bearer %s\r\n" % api_key) if api_key else ""

    def conn(self, timeout=None):
        return http.client.HTTPConnection(self.host, self.port,
                                          timeout=timeout or self.timeout)

    def sock(self, timeout=None):
        s = socket.create_connection((self.host, self.port), timeout=timeout or self.timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def get(self, path, timeout=10):
        c = self.conn(timeout)
        try:
            c.request("GET", path, headers=self.auth)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()


def error_object_problem(status, headers, body):
    """None if body is an OpenAI error object, else what is wrong."""
    try:
        obj = json.loads(body)
    except ValueError:
        return "HTTP %d with a body that is not JSON: %r" % (status, body[:200])
    if not isinstance(obj, dict) or not isinstance(obj.get("error"), dict):
        return "HTTP %d without an error object: %r" % (status, body[:200])
    e = obj["error"]
    if not isinstance(e.get("message"), str) or not e["message"]:
        return "HTTP %d error object without a message: %r" % (status, body[:200])
    if not isinstance(e.get("type"), str):
        return "HTTP %d error object without a type: %r" % (status, body[:200])
    ct = headers.get("Content-Type", "") if headers is not None else "application/json"
    if "application/json" not in ct:
        return "HTTP %d error with Content-Type %r" % (status, ct)
    return None


def bad_status_line(e):
    """Whether e is http.client's complaint about bytes before the status
    line (not about a connection closed before any byte)."""
    return isinstance(e, http.client.BadStatusLine) and \
        not isinstance(e, http.client.RemoteDisconnected) and bool(e.args and e.args[0])


def error_code(body):
    try:
        e = json.loads(body)["error"]
        return e.get("code") or e.get("type")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


# ---- valid requests ----

WORDS = ("once upon a time there was little girl named lily she liked to play "
         "with her toys in the park one day saw big red ball and wanted it "
         "mom said yes they were happy sun was shining bird sang tree").split()


def make_valid(rng, args):
    """A random valid request: (path, body dict, description)."""
    chat = not args.no_chat and rng.random() < 0.4
    stream = rng.random() < 0.6
    long_prompt = rng.random() < args.long_frac
    n_prompt = (args.ctx + rng.randint(1, 64)) if long_prompt else \
        rng.randint(1, args.max_prompt)
    body = {"model": "soak", "max_tokens": rng.randint(1, args.max_gen),
            "stream": stream}
    if stream and rng.random() < 0.7:
        body["stream_options"] = {"include_usage": True}
    r = rng.random()
    if r < 0.4:
        body["temperature"] = 0
    elif r < 0.8:
        body["temperature"] = round(rng.uniform(0.1, 1.5), 2)
        body["seed"] = rng.randint(0, 2**31 - 1)
    if rng.random() < 0.15:
        body["stop"] = rng.sample(WORDS, rng.randint(1, 3))
    if rng.random() < 0.1:
        body["top_p"] = round(rng.uniform(0.1, 1.0), 2)
    if rng.random() < 0.1:
        body["n"] = rng.randint(2, 3)
    if rng.random() < 0.3:
        body["ignore_eos"] = True
    if chat:
        n_words = max(1, n_prompt // 2)
        msgs = []
        if rng.random() < 0.3:
            msgs.append({"role": "system", "content": "You tell short stories."})
        msgs.append({"role": "user",
                     "content": " ".join(rng.choice(WORDS) for _ in range(n_words))})
        if rng.random() < 0.2:
            msgs += [{"role": "assistant", "content": "Once upon a time"},
                     {"role": "user", "content": [{"type": "text", "text": "go on"}]}]
        body["messages"] = msgs
        if rng.random() < 0.1:
            body["logprobs"] = True
            body["top_logprobs"] = rng.randint(0, 3)
        path = "/v1/chat/completions"
    else:
        if rng.random() < 0.7:
            body["prompt"] = [rng.randrange(args.id_min, args.id_max) for _ in range(n_prompt)]
        else:
            body["prompt"] = " ".join(rng.choice(WORDS) for _ in range(max(1, n_prompt // 2)))
        if rng.random() < 0.1:
            body["logprobs"] = rng.randint(0, 3)
        path = "/v1/completions"
    desc = "%s %s prompt~%d max_tokens=%d" % (
        path, "stream" if stream else "plain", n_prompt, body["max_tokens"])
    return path, body, desc


class BrokenChunking(Exception):
    """The chunked transfer coding of a response is broken."""


class StreamLines:
    """The lines of a streamed response body.  For a chunked body the
    chunks are decoded here, not by http.client, whose readline() takes a
    malformed chunk-size line or a connection closed between chunks for
    the end of the body: here the first raises BrokenChunking with the
    bytes found, and the second shows as closed_early."""

    def __init__(self, r):
        self.r = r
        self.fp = r.fp
        self.chunked = r.chunked
        self.buf = b""
        self.ended = False        # the last chunk (size 0) was read
        self.closed_early = False  # EOF before the last chunk

    def _more(self):
        line = self.fp.readline(1024)
        if not line:
            self.closed_early = True
            return False
        size_s = line.split(b";", 1)[0].strip()
        try:
            size = int(size_s, 16)
            if not size_s or size < 0:
                raise ValueError
        except ValueError:
            raise BrokenChunking("chunk-size line %r" % line[:80])
        if size == 0:
            while True:  # trailers up to the empty line
                t = self.fp.readline(1024)
                if not t or t in (b"\r\n", b"\n"):
                    break
            self.ended = True
            return False
        data = self.fp.read(size)
        if len(data) < size:
            self.closed_early = True
            self.buf += data
            return False
        crlf = self.fp.read(2)
        if crlf != b"\r\n":
            raise BrokenChunking("chunk of %d bytes followed by %r instead of CRLF" % (size, crlf))
        self.buf += data
        return True

    def readline(self):
        if not self.chunked:
            return self.r.readline()
        while b"\n" not in self.buf:
            if self.ended or self.closed_early or not self._more():
                out, self.buf = self.buf, b""
                return out
        i = self.buf.index(b"\n") + 1
        out, self.buf = self.buf[:i], self.buf[i:]
        return out


def check_stream(r, body, abort_after, stats, group, desc):
    """Read an SSE stream; returns the outcome label."""
    chunks = 0
    usage = None
    saw_done = False
    err = None
    lines = StreamLines(r)
    while True:
        try:
            line = lines.readline()
        except BrokenChunking as e:
            stats.violation("broken chunked encoding", "%s: %s" % (desc, e))
            return "bad-stream"
        if not line:
            break
        line = line.strip()
        if not line or line.startswith(b":"):
            continue
        if not line.startswith(b"data:"):
            stats.violation("bad SSE line", "%s: %r" % (desc, line[:200]))
            return "bad-stream"
        payload = line[5:].strip()
        if payload == b"[DONE]":
            saw_done = True
            break
        try:
            obj = json.loads(payload)
        except ValueError:
            stats.violation("SSE data is not JSON", "%s: %r" % (desc, payload[:200]))
            return "bad-stream"
        if "error" in obj:
            p = error_object_problem(200, None, json.dumps(obj).encode())
            if p:
                stats.violation("bad stream error event", "%s: %s" % (desc, p))
            err = error_code(json.dumps(obj).encode()) or "error"
            continue
        if not isinstance(obj.get("choices"), list):
            stats.violation("chunk without choices", "%s: %r" % (desc, payload[:200]))
            return "bad-stream"
        if isinstance(obj.get("usage"), dict):
            usage = obj["usage"]
        chunks += 1
        if abort_after is not None and chunks >= abort_after:
            return "cancelled-mid-stream"
    if not saw_done:
        how = ("the connection closed after %d events" % chunks if lines.closed_early or
               not lines.chunked else "the body ended after %d events" % chunks)
        stats.violation("stream ended without [DONE]", "%s: %s" % (desc, how))
        return "bad-stream"
    if lines.chunked and not lines.ended:
        # the rest of the body: the last chunk after [DONE]
        try:
            while lines.readline():
                pass
        except BrokenChunking as e:
            stats.violation("broken chunked encoding", "%s: after [DONE]: %s" % (desc, e))
            return "bad-stream"
    if err:
        return "stream-error:%s" % err
    want_usage = (body.get("stream_options") or {}).get("include_usage")
    if want_usage and usage is None:
        stats.mismatch("stream without the usage chunk asked for", desc)
    if usage and isinstance(usage.get("completion_tokens"), int):
        if usage["completion_tokens"] > body["max_tokens"] * body.get("n", 1):
            stats.mismatch("more completion tokens than max_tokens", "%s: usage %r" % (desc, usage))
    return "ok"


def check_plain(status, headers, data, body, stats, desc):
    try:
        obj = json.loads(data)
    except ValueError:
        stats.violation("2xx body is not JSON", "%s: %r" % (desc, data[:200]))
        return "bad-body"
    ch = obj.get("choices") if isinstance(obj, dict) else None
    if not isinstance(ch, list) or not ch:
        stats.violation("2xx body without choices", "%s: %r" % (desc, data[:300]))
        return "bad-body"
    if len(ch) != body.get("n", 1):
        stats.mismatch("n=%d answered with %d choices" % (body.get("n", 1), len(ch)), desc)
    u = obj.get("usage")
    if not isinstance(u, dict) or not isinstance(u.get("completion_tokens"), int):
        stats.mismatch("response without usage", desc)
    elif u["completion_tokens"] > body["max_tokens"] * body.get("n", 1):
        stats.mismatch("more completion tokens than max_tokens", "%s: usage %r" % (desc, u))
    return "ok"


def judge_refusal(status, headers, data, body, stats, group, desc):
    p = error_object_problem(status, headers, data)
    if p:
        stats.violation("refusal without an OpenAI error object", "%s: %s" % (desc, p))
    code = error_code(data)
    if status == 500:
        stats.violation("HTTP 500", "%s: %r" % (desc, data[:300]))
    elif status == 400 and group == "valid" and code != "context_length_exceeded":
        stats.violation("valid request refused with 400",
                        "%s: request %s -> %r" % (desc, json.dumps(body)[:300], data[:300]))
    return "HTTP %d %s" % (status, code or "")


def valid_client(idx, args, target, stats, deadline, stop):
    rng = random.Random(args.seed * 1000 + idx)
    conn = None
    while time.monotonic() < deadline and not stop.is_set():
        path, body, desc = make_valid(rng, args)
        mode = rng.random()
        # disconnect modes
        abort = None
        if mode < args.abort_frac * 0.3:
            abort = "waiting"
        elif mode < args.abort_frac * 0.7:
            abort = "mid-stream" if body["stream"] else "mid-body"
        elif mode < args.abort_frac * 0.85:
            abort = "mid-send"
        data = json.dumps(body).encode()
        if abort == "mid-send":
            try:
                s = target.sock()
                head = ("POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\n"
                        "Content-Length: %d\r\n\r\n" % (path, target.host, target.auth_line,
                                                        len(data))).encode()
                s.sendall(head + data[:rng.randint(0, len(data) - 1)])
                time.sleep(rng.uniform(0, 0.5))
                s.close()
            except OSError:
                pass
            stats.count("valid", "cancelled-mid-send")
            continue
        reuse = conn is not None and abort is None and not body["stream"] and rng.random() < 0.5
        if not reuse:
            if conn is not None:
                conn.close()
            conn = target.conn()
        h = dict(target.auth)
        h["Content-Type"] = "application/json"
        label = None
        try:
            conn.request("POST", path, body=data, headers=h)
            if abort == "waiting":
                time.sleep(rng.uniform(0, 0.3))
                conn.close()
                conn = None
                stats.count("valid", "cancelled-waiting")
                continue
            r = conn.getresponse()
            if r.status >= 300:
                d = r.read()
                label = judge_refusal(r.status, r.headers, d, body, stats, "valid", desc)
            elif body["stream"]:
                if "text/event-stream" not in r.headers.get("Content-Type", ""):
                    stats.mismatch("stream without Content-Type text/event-stream", desc)
                after = rng.randint(1, 8) if abort == "mid-stream" else None
                label = check_stream(r, body, after, stats, "valid", desc)
                if label == "cancelled-mid-stream" or label == "bad-stream":
                    conn.close()
                    conn = None
                elif not r.chunked:
                    r.read()
                else:
                    # StreamLines read the body past http.client: the
                    # connection cannot be reused
                    conn.close()
                    conn = None
            else:
                if abort == "mid-body":
                    r.read(rng.randint(0, 32))
                    conn.close()
                    conn = None
                    label = "cancelled-mid-body"
                else:
                    d = r.read()
                    label = check_plain(r.status, r.headers, d, body, stats, desc)
            if conn is not None and r.will_close:
                conn.close()
                conn = None
        except socket.timeout:
            stats.violation("no answer within --timeout", desc)
            label = "timeout"
            conn.close()
            conn = None
        except (OSError, http.client.HTTPException) as e:
            if bad_status_line(e):
                stats.violation("response does not start with a status line",
                                "%s: %r" % (desc, e.args[0][:200]))
                label = "bad-status-line"
            elif reuse and isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError,
                                        ConnectionResetError)):
                # A kept-alive connection the server closed (idle timeout):
                # not an error of the request; retry it on a fresh one.
                label = "keepalive-closed"
            else:
                stats.violation("connection closed without a response",
                                "%s: %s: %s" % (desc, type(e).__name__, e))
                label = "no-response"
            if conn is not None:
                conn.close()
            conn = None
        except ValueError as e:
            # http.client's chunked decoding meets bytes that are no chunk size
            stats.violation("broken chunked encoding", "%s: %s" % (desc, e))
            label = "bad-chunking"
            conn.close()
            conn = None
        stats.count("valid", label)
    if conn is not None:
        conn.close()


# ---- malformed requests ----

def http_req(target, method, path, body=b"", ctype="application/json", extra=""):
    head = "%s %s HTTP/1.1\r\nHost: %s\r\n%s" % (method, path, target.host, target.auth_line)
    if ctype:
        head += "Content-Type: %s\r\n" % ctype
    if body is not None:
        head += "Content-Length: %d\r\n" % len(body)
    head += extra + "Connection: close\r\n\r\n"
    return head.encode() + (body or b"")


# (name, expected status per the interface or None, builder(target, rng) -> bytes or
#  a callable doing its own I/O)
def bad_cases(args):
    huge = args.max_body + 4096
    comp, chat = "/v1/completions", "/v1/chat/completions"
    J = lambda o: json.dumps(o).encode()
    deep = b"[" * 100000 + b"]" * 100000
    return [
        ("bad JSON", 400, lambda t, r: http_req(t, "POST", comp, b'{"prompt": "a", "max_tokens": ')),
        ("bad JSON chat", 400, lambda t, r: http_req(t, "POST", chat, b'{"messages": [}')),
        ("JSON not an object", 400, lambda t, r: http_req(t, "POST", comp, r.choice([b"[]", b'"x"', b"null", b"42"]))),
        ("empty body", 400, lambda t, r: http_req(t, "POST", comp, b"")),
        ("no Content-Length", None, lambda t, r: http_req(t, "POST", comp, None)),
        ("deeply nested JSON", 400, lambda t, r: http_req(t, "POST", comp, deep)),
        ("invalid UTF-8", 400, lambda t, r: http_req(t, "POST", comp, b'{"prompt": "\xff\xfe\xc3", "max_tokens": 2}')),
        ("prompt wrong type", 400, lambda t, r: http_req(t, "POST", comp, J({"prompt": r.choice([5, True, {"a": 1}, [1.5], [[]]]), "max_tokens": 2}))),
        ("messages wrong type", 400, lambda t, r: http_req(t, "POST", chat, J({"messages": r.choice(["hi", [], [1], [{"role": 5, "content": "x"}], [{"role": "user", "content": 7}], [{"content": "x"}], [{"role": "user", "content": "x", "name": 5}], [{"role": "user", "content": [{"type": "text"}]}]]), "max_tokens": 2}))),
        ("message without content", None, lambda t, r: http_req(t, "POST", chat, J({"messages": [{"role": "user"}], "max_tokens": 2}))),
        ("unknown role", None, lambda t, r: http_req(t, "POST", chat, J({"messages": [{"role": "wizard", "content": "x"}], "max_tokens": 2}))),
        ("null fields", None, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 2, "temperature": None, "stop": None, "seed": None, "top_p": None}))),
        ("max_tokens wrong", 400, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": r.choice(["x", 0, -1, 1.5, 10**12]) }))),
        ("temperature wrong", 400, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 2, "temperature": r.choice(["hot", -1, 5, [1]])}))),
        ("n wrong", 400, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 2, "n": r.choice([0, 100, "2"])}))),
        ("stop wrong", 400, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 2, "stop": r.choice([5, [""], ["a"] * 40, [1]])}))),
        ("logit_bias wrong", 400, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 2, "logit_bias": r.choice([{"x": 1}, {"5": 1000}, [1], {"-3": 1}])}))),
        ("token id out of range", 400, lambda t, r: http_req(t, "POST", comp, J({"prompt": [1, r.choice([-1, 10**9, 2**31])], "max_tokens": 2}))),
        ("stream_options without stream", 400, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 2, "stream_options": {"include_usage": True}}))),
        ("tools", 400, lambda t, r: http_req(t, "POST", chat, J({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]}))),
        ("response_format", 400, lambda t, r: http_req(t, "POST", chat, J({"messages": [{"role": "user", "content": "x"}], "response_format": r.choice([{"type": "json_schema"}, {"type": "xml"}, {"type": "json_schema", "json_schema": {"schema": {"type": "frobnicate"}}}])}))),
        ("body over --max-body", 413, lambda t, r: ("huge", comp, huge)),
        ("Content-Length over --max-body, no body", 413, lambda t, r: ("bighead", comp, huge)),
        ("wrong method", 405, lambda t, r: http_req(t, r.choice(["PUT", "DELETE", "PATCH"]), comp, J({"prompt": "a"}))),
        ("GET on a POST path", 405, lambda t, r: http_req(t, "GET", r.choice([comp, chat, "/tokenize"]), None, None)),
        ("POST on a GET path", 405, lambda t, r: http_req(t, "POST", r.choice(["/health", "/v1/models", "/metrics"]), b"{}")),
        ("unknown path", 404, lambda t, r: http_req(t, "GET", r.choice(["/", "/v2/completions", "/v1/completions/x", "/%00", "/v1/" + "a" * 3000, "/../etc/passwd"]), None, None)),
        ("unknown method token", None, lambda t, r: http_req(t, "FROB", comp, b"{}")),
        ("bad Content-Length", 400, lambda t, r: (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n{}" % (comp.encode(), r.choice([b"abc", b"-5", b"1e3", b" ", b"0x10"])))),
        ("Content-Length overflow", None, lambda t, r: (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n{}" % comp.encode())),
        ("two Content-Lengths", 400, lambda t, r: (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 7\r\n\r\n{}" % comp.encode())),
        ("chunked body", None, lambda t, r: (("POST %s HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" % (comp, t.auth_line)).encode() + b"5\r\n{\"pro\r\n0\r\n\r\n")),
        ("header too long", None, lambda t, r: (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 200000 + b"\r\n\r\n")),
        ("many headers", None, lambda t, r: (b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(2000)) + b"\r\n")),
        ("bad request line", None, lambda t, r: r.choice([b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET / FOO/1.1\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64)])),
        ("header without colon", 400, lambda t, r: b"GET /health HTTP/1.1\r\nHost x\r\n\r\n"),
        ("truncated request line", None, lambda t, r: ("trunc", b"POST /v1/compl")),
        ("truncated headers", None, lambda t, r: ("trunc", ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Len" % comp).encode())),
        ("truncated body", None, lambda t, r: ("trunc", http_req(t, "POST", comp, J({"prompt": "once upon a time", "max_tokens": 4}))[:-7])),
        ("garbage bytes", None, lambda t, r: ("trunc", bytes(r.randrange(256) for _ in range(r.randint(1, 3000))))),
        ("idle connection", None, lambda t, r: ("idle", None)),
        ("wrong API key", 401 if args.api_key else None, lambda t, r: (http_req(t, "GET", "/v1/models", None, None).replace(t.auth_line.encode(), b"") .replace(b"Host:", b"Authorization: Bearer wrong-key\r\nHost:", 1))),
        ("bad /tokenize", 400, lambda t, r: http_req(t, "POST", "/tokenize", J(r.choice([{}, {"content": 5}, {"content": "a", "add_special": "yes"}])))),
        ("bad /detokenize", 400, lambda t, r: http_req(t, "POST", "/detokenize", J(r.choice([{}, {"tokens": "x"}, {"tokens": [-1]}, {"tokens": [10**9]}])))),
        # RFC 9112 framing violations: each gets one status line, then the
        # connection is closed.
        ("Content-Length with Transfer-Encoding", 400, lambda t, r: (("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n" % (comp, t.auth_line)).encode() + b"2\r\n{}\r\n0\r\n\r\n")),
        ("unknown Transfer-Encoding", 501, lambda t, r: (("POST %s HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: %s\r\n\r\n" % (comp, t.auth_line, r.choice(["gzip", "frobnicate", "chunked, gzip", "identity"]))).encode() + b"2\r\n{}\r\n0\r\n\r\n")),
        ("absurd chunk size", None, lambda t, r: (("POST %s HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: chunked\r\n\r\n" % (comp, t.auth_line)).encode() + r.choice([b"ffffffffffffffffffffff\r\n", b"7fffffffffffffff\r\n{", b"zz\r\n", b"-1\r\n", b"5\r\nabcdeXX"]))),
        ("folded header", 400, lambda t, r: b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\n\r\n"),
        ("space before colon", 400, lambda t, r: b"GET /health HTTP/1.1\r\nHost : x\r\n\r\n"),
        ("NUL in a header", 400, lambda t, r: b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
        # Grammars and schemas too large to compile in reasonable time:
        # served or refused with a 400 before the first byte, never a 500.
        ("oversized schema", None, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 2, "response_format": {"type": "json_schema", "json_schema": {"name": "big", "schema": {"type": "object", "properties": {"p%d" % i: {"type": "integer"} for i in range(r.choice([2000, 10000, 40000]))}, "required": ["p%d" % i for i in range(2000)]}}}}))),
        ("large enum schema", None, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 4, "stream": r.random() < 0.5, "response_format": {"type": "json_schema", "json_schema": {"name": "enum", "schema": {"type": "object", "properties": {"v": {"enum": ["value-%d" % i for i in range(6000)]}}, "required": ["v"]}}}}))),
        ("long grammar chain", None, lambda t, r: http_req(t, "POST", comp, J({"prompt": "a", "max_tokens": 2, "grammar": "root ::= r0\n" + "".join("r%d ::= \"a\" r%d\n" % (i, i + 1) for i in range(20000)) + "r20000 ::= \"b\"\n"}))),
    ]


# Requests whose HTTP framing itself is broken: the server may close the
# connection instead of answering.
FRAMING_CASES = {"bad Content-Length", "two Content-Lengths", "Content-Length overflow",
                 "garbage bytes", "truncated request line", "truncated headers", "truncated body", "header without colon",
                 "bad request line", "header too long", "many headers", "chunked body",
                 "unknown method token", "no Content-Length",
                 "Content-Length with Transfer-Encoding", "unknown Transfer-Encoding", "absurd chunk size",
                 "folded header", "space before colon", "NUL in a header"}

# Of those, the ones whose request is complete: the server must answer each
# (it has all it needs to see that the request is malformed), not wait.
MUST_ANSWER = {"bad Content-Length", "two Content-Lengths", "Content-Length with Transfer-Encoding",
               "unknown Transfer-Encoding", "absurd chunk size", "folded header", "space before colon",
               "NUL in a header", "header without colon", "header too long", "many headers",
               "bad request line"}


def read_response(sock, method="POST"):
    r = http.client.HTTPResponse(sock, method=method)
    r.begin()
    return r.status, r.headers, r.read()


def send_huge(target, path, size, with_body, rng, timeout):
    """Declare a body of size bytes; send it (or not) in pieces while
    watching for an early response.  Returns (status, headers, body) or None."""
    s = target.sock(timeout)
    try:
        head = ("POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\n"
                "Content-Length: %d\r\nConnection: close\r\n\r\n"
                % (path, target.host, target.auth_line, size)).encode()
        s.sendall(head)
        sent = 0
        piece = b'{"prompt": "' + b"a" * 65536
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            rd, _, _ = select.select([s], [], [], 0 if with_body and sent < size else 0.2)
            if rd:
                return read_response(s)
            if with_body and sent < size:
                n = min(len(piece), size - sent)
                try:
                    s.sendall(piece[:n])
                except (BrokenPipeError, ConnectionResetError):
                    rd, _, _ = select.select([s], [], [], 2)
                    return read_response(s) if rd else None
                sent += n
        return None
    finally:
        s.close()


def bad_client(idx, args, target, stats, deadline, stop, idle_sem):
    """Sends malformed requests at --bad-rate / --bad-clients per second,
    each on its own short-lived thread (at most 16 at once per client), so
    that one the server keeps waiting does not hold the others back."""
    rng = random.Random(args.seed * 7777 + idx)
    cases = bad_cases(args)
    period = args.bad_clients / args.bad_rate if args.bad_rate > 0 else 1.0
    slots = threading.Semaphore(16)
    running = []
    while time.monotonic() < deadline and not stop.is_set():
        t_next = time.monotonic() + rng.expovariate(1.0 / period)
        name, want, build = rng.choice(cases)
        if slots.acquire(timeout=max(0.01, deadline - time.monotonic())):
            sub = random.Random(rng.getrandbits(64))

            def job(name=name, want=want, build=build, sub=sub):
                try:
                    bad_one(name, want, build, sub, args, target, stats, deadline, idle_sem)
                finally:
                    slots.release()
            t = threading.Thread(target=job, daemon=True)
            t.start()
            running.append(t)
            running = [t for t in running if t.is_alive()]
        dt = t_next - time.monotonic()
        if dt > 0:
            time.sleep(min(dt, max(0, deadline - time.monotonic())))
    for t in running:
        t.join(args.timeout)


def bad_one(name, want, build, rng, args, target, stats, deadline, idle_sem):
    """One malformed request, judged and counted."""
    label = None
    try:
        req = build(target, rng)
        if isinstance(req, tuple) and req[0] in ("huge", "bighead"):
            res = send_huge(target, req[1], req[2], req[0] == "huge", rng, 30)
            if res is None:
                stats.violation("no response to an over-long body", name)
                label = "no-response"
            else:
                st, hd, d = res
                label = judge_bad(name, want, st, hd, d, stats, req)
        elif isinstance(req, tuple) and req[0] == "trunc":
            s = target.sock(10)
            try:
                s.sendall(req[1])
                time.sleep(rng.uniform(0, 0.5))
                if rng.random() < 0.5:
                    s.shutdown(socket.SHUT_WR)
                    # The server may answer 400 or just close; both are fine.
                    rd, _, _ = select.select([s], [], [], 5)
                    if rd:
                        try:
                            st, hd, d = read_response(s)
                            label = judge_bad(name, None, st, hd, d, stats)
                        except (http.client.HTTPException, OSError):
                            label = "closed"
                    else:
                        label = "no answer in 5s"
                else:
                    label = "client closed"
            finally:
                s.close()
        elif isinstance(req, tuple) and req[0] == "idle":
            if idle_sem.acquire(blocking=False):
                try:
                    s = target.sock(10)
                    try:
                        t_idle = min(rng.uniform(1, args.idle_max), max(0, deadline - time.monotonic()))
                        rd, _, _ = select.select([s], [], [], t_idle)
                        label = "server closed idle" if rd else "client closed idle"
                    finally:
                        s.close()
                finally:
                    idle_sem.release()
            else:
                label = "skipped"
        elif name in FRAMING_CASES:
            # The server may wait for more bytes of a broken request; after
            # 10 s of silence the client gives up (the server's idle timeout
            # is what reclaims such connections).
            s = target.sock(10)
            try:
                try:
                    s.sendall(req)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                try:
                    st, hd, d = read_response(s)
                    label = judge_bad(name, want, st, hd, d, stats, req)
                except socket.timeout:
                    label = "no answer in 10s"
                    if name in MUST_ANSWER:
                        stats.violation("a malformed request left without an answer for 10 s", name)
            finally:
                s.close()
        else:
            s = target.sock(30)
            try:
                try:
                    s.sendall(req)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                st, hd, d = read_response(s)
                label = judge_bad(name, want, st, hd, d, stats, req)
            finally:
                s.close()
    except socket.timeout:
        stats.violation("no answer within the timeout", name)
        label = "timeout"
    except (OSError, http.client.HTTPException) as e:
        if bad_status_line(e):
            stats.violation("response does not start with a status line", "%s: %r" % (name, e.args[0][:200]))
            label = "bad-status-line"
        elif want is None or name in FRAMING_CASES:
            # Broken HTTP framing: closing the connection is an answer too.
            label = "closed (%s)" % type(e).__name__
            if want is not None:
                stats.mismatch("%s: connection closed, interface says %d" % (name, want),
                               type(e).__name__)
        else:
            stats.violation("connection closed without a response",
                            "%s: %s: %s" % (name, type(e).__name__, e))
            label = "no-response"
    except ValueError as e:
        stats.violation("broken chunked encoding", "%s: %s" % (name, e))
        label = "bad-chunking"
    stats.count("bad:" + name, label)



def judge_bad(name, want, status, headers, data, stats, req=None):
    if data.startswith(b"HTTP/1."):
        what = "a second status line and headers in the body of the response"
        if name in FRAMING_CASES:
            stats.mismatch("%s: %s" % (name, what), data[:200])
        else:
            stats.violation(what, "%s: HTTP %d, body %r" % (name, status, data[:300]))
    if 200 <= status < 300:
        if want is not None:
            sent = req.split(b"\r\n\r\n", 1)[-1][:300] if isinstance(req, bytes) else b""
            stats.violation("malformed request answered %d" % status,
                            "%s: sent %r, got %r" % (name, sent, data[:300]))
        return "HTTP %d" % status
    p = error_object_problem(status, headers, data)
    if p and name in FRAMING_CASES:
        # Refused by the HTTP layer before the request reached the API.
        stats.mismatch("%s: HTTP %d without an OpenAI error object" % (name, status), data[:200])
    elif p:
        stats.violation("refusal without an OpenAI error object", "%s: %s" % (name, p))
    if status == 500:
        stats.violation("HTTP 500", "%s: %r" % (name, data[:300]))
    if want is not None and status != want:
        stats.mismatch("%s: %d, interface says %d" % (name, status, want), data[:200])
    return "HTTP %d %s" % (status, error_code(data) or "")


# ---- slow-header clients and latency probes ----

def slow_client(idx, args, target, stats, deadline, stop):
    """Holds a connection that sends a request head one byte every
    --slow-interval seconds; when the server drops it (or answers),
    reconnects.  Counts how long the server let each one hang on."""
    head = b"GET /health HTTP/1.1\r\nHost: slow\r\nX-Slow: " + b"s" * 64 + b"\r\n\r\n"
    while time.monotonic() < deadline and not stop.is_set():
        t0 = time.monotonic()
        try:
            s = target.sock(10)
        except OSError as e:
            stats.count("slow", "connect failed (%s)" % type(e).__name__)
            time.sleep(args.slow_interval)
            continue
        label = None
        try:
            for i in range(len(head)):
                if time.monotonic() >= deadline or stop.is_set():
                    label = "client gave up at the end"
                    break
                try:
                    s.sendall(head[i:i + 1])
                except OSError:
                    label = "dropped by the server"
                    break
                rd, _, _ = select.select([s], [], [], args.slow_interval)
                if rd:
                    try:
                        d = s.recv(4096)
                    except OSError:
                        d = b""
                    m = re.match(rb"HTTP/1\.[01] (\d{3})", d)
                    label = ("answered %s" % m.group(1).decode()) if m else "dropped by the server"
                    break
            else:
                label = "whole head sent"
        finally:
            s.close()
        held = time.monotonic() - t0
        bucket = "<5s" if held < 5 else "<15s" if held < 15 else "<60s" if held < 60 else ">=60s"
        stats.count("slow", "%s after %s" % (label, bucket))


def percentile(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def probe_client(args, target, stats, deadline, stop, lat):
    """--probe-rate times a second: GET /health, then a small completion
    (non-streaming, 4 tokens); each latency goes into lat[kind]."""
    rng = random.Random(args.seed * 31 + 5)
    period = 1.0 / args.probe_rate
    while time.monotonic() < deadline and not stop.is_set():
        t_next = time.monotonic() + period
        kind = "health" if rng.random() < 0.5 else "completion"
        t0 = time.monotonic()
        try:
            if kind == "health":
                st, d = target.get("/health", args.probe_timeout)
            else:
                st, d = plain_request(target, max_tokens=4, timeout=args.probe_timeout)
            dt = time.monotonic() - t0
            with stats.lock:
                lat.setdefault(kind, []).append(dt)
            if st != 200:
                stats.violation("latency probe refused", "%s: HTTP %d %r" % (kind, st, d[:200]))
        except (OSError, http.client.HTTPException) as e:
            stats.violation("latency probe without an answer within --probe-timeout",
                            "%s: %s: %s" % (kind, type(e).__name__, e))
        stats.count("probe", kind)
        dt = t_next - time.monotonic()
        if dt > 0:
            time.sleep(min(dt, max(0, deadline - time.monotonic())))


# ---- metrics, server process ----

def metric(text, name):
    m = re.search(r"^%s(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def read_metrics(target):
    try:
        st, body = target.get("/metrics", 10)
        if st == 200:
            return body.decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        pass
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_healthy(target, proc, wait_s):
    t_end = time.monotonic() + wait_s
    while time.monotonic() < t_end:
        if proc is not None and proc.poll() is not None:
            return "the server exited with status %d before it was ready" % proc.returncode
        try:
            st, _ = target.get("/health", 2)
            if st == 200:
                return None
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.2)
    return "the server did not answer /health 200 within %gs" % wait_s


def plain_request(target, stream=False, max_tokens=8, timeout=60):
    """A small valid request; returns (status, body bytes)."""
    c = target.conn(timeout)
    try:
        body = {"prompt": "once upon a time", "max_tokens": max_tokens, "temperature": 0,
                "stream": stream}
        h = dict(target.auth)
        h["Content-Type"] = "application/json"
        c.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def drain_check(args, target, proc, stats, log):
    """Start a few long streams, send SIGTERM, check they end cleanly and
    that new requests are refused; returns the exit status."""
    results = []
    t_term = [None]

    def long_stream(i):
        c = target.conn(args.grace + 60)
        try:
            body = {"prompt": [args.id_min + i] * 8, "max_tokens": args.drain_tokens,
                    "ignore_eos": True, "stream": True, "temperature": 1, "seed": i}
            h = dict(target.auth)
            h["Content-Type"] = "application/json"
            c.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers=h)
            r = c.getresponse()
            if r.status != 200:
                results.append(("HTTP %d" % r.status, r.read()[:200]))
                return
            chunks, done, err = 0, False, None
            first.release()
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if line == b"data: [DONE]":
                    done = True
                    break
                if line.startswith(b"data:"):
                    try:
                        obj = json.loads(line[5:])
                    except ValueError:
                        err = "bad data"
                        continue
                    if "error" in obj:
                        err = error_code(line[5:]) or "error"
                    chunks += 1
            ended = time.monotonic()
            if t_term[0] is None or ended < t_term[0]:
                results.append(("done before SIGTERM", err))
            else:
                results.append(("done" if done else "cut", err))
        except (OSError, http.client.HTTPException) as e:
            results.append(("exception", str(e)))
        finally:
            c.close()

    first = threading.Semaphore(0)
    ths = [threading.Thread(target=long_stream, args=(i,), daemon=True) for i in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        first.acquire(timeout=30)
    log("sending SIGTERM with %d streams running" % len(ths))
    t_term[0] = time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)
    time.sleep(0.3)
    # While draining: /health 503 and new generation requests 503.
    if proc.poll() is None:
        try:
            st, d = target.get("/health", 5)
            if st != 503:
                stats.mismatch("/health while draining: %d, interface says 503" % st, d[:200])
            st, d = plain_request(target, timeout=10)
            if st != 503:
                stats.mismatch("new request while draining: %d, interface says 503" % st, d[:200])
            elif error_object_problem(st, None, d):
                stats.violation("refusal without an OpenAI error object", "draining: %r" % d[:200])
        except (OSError, http.client.HTTPException):
            pass  # the listener may already be closed
    try:
        rc = proc.wait(args.grace + 30)
    except subprocess.TimeoutExpired:
        stats.violation("server did not exit after SIGTERM", "within --grace %d + 30 s" % args.grace)
        os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    for t in ths:
        t.join(5)
    for what, detail in results:
        if what == "done before SIGTERM":
            stats.count("drain", what)
        elif what == "done":
            stats.count("drain", "stream finished" if detail is None else "stream ended: %s" % detail)
        else:
            stats.violation("stream running at SIGTERM not ended cleanly", "%s: %s" % (what, detail))
            stats.count("drain", what)
    return rc


def main(argv=None):
    p = argparse.ArgumentParser(description="Bounded soak test of an OpenAI-compatible server.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--url", default=None, help="server URL (default http://127.0.0.1:8080, "
                   "or http://127.0.0.1:{port} with --server-cmd)")
    p.add_argument("--server-cmd", default=None, help="start this server (shell command)")
    p.add_argument("--server-log", default=None, help="the server's stdout+stderr (default "
                   "soak-server.log in $TMPDIR)")
    p.add_argument("--server-wait", type=float, default=300)
    p.add_argument("--grace", type=int, default=30, help="the server's --grace (s)")
    p.add_argument("--duration", type=float, default=600, help="seconds of load (default 600)")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--bad-clients", type=int, default=2)
    p.add_argument("--bad-rate", type=float, default=10, help="malformed requests/s, all together")
    p.add_argument("--slow-clients", type=int, default=0,
                   help="connections sending a request head one byte at a time (default 0)")
    p.add_argument("--slow-interval", type=float, default=1.0, help="seconds between their bytes")
    p.add_argument("--probe-rate", type=float, default=2, help="latency probes a second (0: none)")
    p.add_argument("--probe-timeout", type=float, default=10, help="a probe's time limit (s)")
    p.add_argument("--abort-frac", type=float, default=0.25,
                   help="share of valid requests given up on (default 0.25)")
    p.add_argument("--long-frac", type=float, default=0.02,
                   help="share of prompts longer than --ctx (default 0.02)")
    p.add_argument("--ctx", type=int, default=512, help="the server's context per sequence")
    p.add_argument("--max-prompt", type=int, default=200)
    p.add_argument("--max-gen", type=int, default=128)
    p.add_argument("--max-body", type=int, default=1048576, help="the server's --max-body")
    p.add_argument("--idle-max", type=float, default=20, help="longest idle connection (s)")
    p.add_argument("--id-min", type=int, default=3)
    p.add_argument("--id-max", type=int, default=500)
    p.add_argument("--no-chat", action="store_true", help="no /v1/chat/completions requests")
    p.add_argument("--api-key", default=os.environ.get("SOAK_API_KEY"))
    p.add_argument("--timeout", type=float, default=120, help="per-request socket timeout (s)")
    p.add_argument("--settle", type=float, default=30,
                   help="seconds to wait for the KV blocks to return (default 30)")
    p.add_argument("--no-drain-check", action="store_true",
                   help="with --server-cmd: SIGTERM with nothing running")
    p.add_argument("--drain-tokens", type=int, default=None,
                   help="max_tokens of the streams running at SIGTERM (default --ctx - 16)")
    p.add_argument("--strict", action="store_true", help="mismatches are violations")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default=None, metavar="FILE", help="write the summary as JSON")
    args = p.parse_args(argv)
    if args.drain_tokens is None:
        args.drain_tokens = max(1, args.ctx - 16)
    if args.url is None:
        args.url = "http://127.0.0.1:{port}" if args.server_cmd else "http://127.0.0.1:8080"
    log = lambda m: (sys.stderr.write("soak: %s\n" % m), sys.stderr.flush())

    proc = None
    logf = None
    log_path = args.server_log or os.path.join(os.environ.get("TMPDIR", "/tmp"), "soak-server.log")
    if args.server_cmd:
        port = free_port()
        cmd = args.server_cmd.replace("{port}", str(port))
        args.url = args.url.replace("{port}", str(port))
        log("starting: %s (output in %s)" % (cmd, log_path))
        logf = open(log_path, "wb")
        proc = subprocess.Popen(cmd, shell=True, stdin=subprocess.DEVNULL, stdout=logf,
                                stderr=subprocess.STDOUT, start_new_session=True)
    elif "{port}" in args.url:
        p.error("{port} in --url needs --server-cmd")
    target = Target(args.url, args.api_key, args.timeout)
    problem = wait_healthy(target, proc, args.server_wait)
    if problem:
        log(problem)
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return 2

    stats = Stats()
    mtext = read_metrics(target)
    base_used = metric(mtext, "hearth_kv_blocks_used") if mtext else None
    log("server ready at %s; KV blocks used at the start: %s; %ds of load, %d clients, "
        "%d malformed-request threads, %d slow-header clients" % (
            args.url, base_used, args.duration, args.clients, args.bad_clients, args.slow_clients))

    stop = threading.Event()
    t0 = time.monotonic()
    deadline = t0 + args.duration
    idle_sem = threading.Semaphore(4)
    threads = [threading.Thread(target=valid_client, args=(i, args, target, stats, deadline, stop),
                                daemon=True) for i in range(args.clients)]
    threads += [threading.Thread(target=bad_client, args=(i, args, target, stats, deadline, stop,
                                                          idle_sem), daemon=True)
                for i in range(args.bad_clients)]
    threads += [threading.Thread(target=slow_client, args=(i, args, target, stats, deadline, stop),
                                 daemon=True) for i in range(args.slow_clients)]
    lat = {}
    if args.probe_rate > 0:
        threads.append(threading.Thread(target=probe_client, args=(args, target, stats, deadline, stop, lat),
                                        daemon=True))
    for t in threads:
        t.start()
    crashed = False
    try:
        last_report = t0
        while any(t.is_alive() for t in threads):
            time.sleep(1)
            now = time.monotonic()
            if proc is not None and proc.poll() is not None and not crashed:
                crashed = True
                stats.violation("server died during the soak", "exit status %d" % proc.returncode)
                stop.set()
            if now - last_report >= 30:
                last_report = now
                with stats.lock:
                    n = sum(stats.outcomes.values())
                    v = sum(stats.n_violations.values())
                log("%.0fs: %d requests, %d violations" % (now - t0, n, v))
            if now > deadline + args.timeout + 30:
                stats.violation("client threads still running long after the deadline", "")
                stop.set()
                break
    except KeyboardInterrupt:
        stop.set()
        log("interrupted")

    # After the load: alive, answering, KV back to baseline.
    alive = proc is None or proc.poll() is None
    kv_note = "not checked"
    if alive:
        try:
            st, _ = target.get("/health", 10)
            if st != 200:
                stats.violation("/health after the soak", "HTTP %d" % st)
            st, d = plain_request(target)
            if st != 200:
                stats.violation("plain request after the soak", "HTTP %d %r" % (st, d[:200]))
        except (OSError, http.client.HTTPException) as e:
            stats.violation("server not answering after the soak", str(e))
        used = None
        t_end = time.monotonic() + args.settle
        while True:
            mtext = read_metrics(target)
            used = metric(mtext, "hearth_kv_blocks_used") if mtext else None
            running = metric(mtext, "hearth_requests_running") if mtext else None
            waiting = metric(mtext, "hearth_requests_waiting") if mtext else None
            if used is None or (used == base_used and not running and not waiting):
                break
            if time.monotonic() > t_end:
                break
            time.sleep(0.5)
        if base_used is None or used is None:
            kv_note = "not checked (no hearth_kv_blocks_used in /metrics)"
        elif used != base_used:
            kv_note = "%g blocks used, %g at the start (running %s, waiting %s)" % (
                used, base_used, running, waiting)
            stats.violation("KV blocks not back to the baseline", kv_note)
        else:
            kv_note = "back to %g" % used
            if running or waiting:
                stats.violation("requests still counted after the soak",
                                "running %s, waiting %s" % (running, waiting))
        if mtext:
            stats.final_metrics = {k: metric(mtext, k) for k in (
                "hearth_kv_blocks_used", "hearth_kv_blocks_cached", "hearth_kv_blocks_total",
                "hearth_generated_tokens_total", "hearth_preemptions_total",
                "hearth_prefix_cache_hits_total")}
    else:
        if proc is not None and not crashed:
            stats.violation("server died during the soak", "exit status %d" % proc.returncode)

    rc = None
    if proc is not None:
        if proc.poll() is None:
            if args.no_drain_check:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    rc = proc.wait(args.grace + 30)
                except subprocess.TimeoutExpired:
                    stats.violation("server did not exit after SIGTERM", "")
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc = proc.wait()
            else:
                rc = drain_check(args, target, proc, stats, log)
            if rc != 0:
                stats.violation("exit status after SIGTERM", "%s (want 0)" % rc)
        else:
            rc = proc.returncode
        logf.close()
        with open(log_path, "rb") as f:
            out = f.read().decode("utf-8", "replace")
        for mark in SANITIZER_MARKS:
            i = out.find(mark)
            if i >= 0:
                stats.violation("sanitizer report in the server's output",
                                out[max(0, i - 200):i + 800])

    # Summary.
    wall = time.monotonic() - t0
    print("soak: %s, %.0fs" % (args.url, wall))
    groups = {}
    for (g, label), n in sorted(stats.outcomes.items()):
        groups.setdefault(g, []).append((label, n))
    total = sum(stats.outcomes.values())
    print("%d requests and connections" % total)
    for g in sorted(groups, key=lambda g: (g.startswith("bad:"), g)):
        print("  %-45s %s" % (g, ", ".join("%s %d" % (l, n) for l, n in groups[g])))
    statuses = {}
    other = {}
    for (g, label), n in stats.outcomes.items():
        m = re.match(r"HTTP (\d+)", label)
        if m or label == "ok" or label.startswith("stream-error"):
            k = m.group(1) if m else "200"
            statuses[k] = statuses.get(k, 0) + n
        else:
            k = re.sub(r" \(.*", "", label)
            other[k] = other.get(k, 0) + n
    print("by status: " + ", ".join("%s %d" % (k, statuses[k]) for k in sorted(statuses)))
    print("without a status: " + ", ".join("%s %d" % (k, other[k]) for k in sorted(other)))
    print("KV blocks: %s" % kv_note)
    latency = {}
    for kind in sorted(lat):
        xs = lat[kind]
        latency[kind] = {"n": len(xs), "p50_ms": percentile(xs, 0.5) * 1000,
                         "p95_ms": percentile(xs, 0.95) * 1000, "max_ms": max(xs) * 1000}
        print("probe latency, %s: %d probes, p50 %.1f ms, p95 %.1f ms, max %.1f ms" % (
            kind, len(xs), latency[kind]["p50_ms"], latency[kind]["p95_ms"], latency[kind]["max_ms"]))
    if proc is not None:
        print("server exit status: %s (output in %s)" % (rc, log_path))
    if stats.mismatches:
        print("mismatches with the interface%s:" % (" (violations with --strict)" if not args.strict else ""))
        for what, (n, ex) in sorted(stats.mismatches.items()):
            print("  %dx %s; e.g. %r" % (n, what, ex))
    nv = sum(stats.n_violations.values())
    if args.strict:
        nv += sum(n for n, _ in stats.mismatches.values())
    if stats.violations:
        print("VIOLATIONS:")
        for what, n in sorted(stats.n_violations.items()):
            print("  %dx %s" % (n, what))
        for what, detail in stats.violations:
            print("    %s: %s" % (what, detail[:1500]))
    print("soak: %s" % ("PASS" if nv == 0 else "FAIL (%d violations)" % nv))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"url": args.url, "wall_s": wall,
                       "outcomes": {"%s|%s" % k: n for k, n in stats.outcomes.items()},
                       "by_status": statuses, "without_status": other, "kv": kv_note, "exit_status": rc,
                       "violations": stats.n_violations,
                       "violation_examples": stats.violations,
                       "mismatches": {k: v[0] for k, v in stats.mismatches.items()},
                       "final_metrics": getattr(stats, "final_metrics", None),
                       "latency": latency,
                       "pass": nv == 0}, f, indent=2, default=str)
    return 0 if nv == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
