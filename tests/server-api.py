#!/usr/bin/env python3
# server-api.py -- hearth serve end to end over HTTP, for tests/cli-serve.sh.
#
# usage: server-api.py [HEARTH [SECTION...]]
#
# HEARTH is the hearth program (default: $HEARTH, else src/hearth in the
# source tree above this script).  The model is stories260K.gguf from
# $HEARTH_TEST_DATA/models (default: ../shared beside the source tree),
# served with the chatml template.  With SECTION names only those sections
# run (the names are printed as each section starts).
#
# Several servers are started, each on 127.0.0.1 with --port 0, the port
# taken from the "listening on" line of its standard error, then /health
# polled until it answers 200:
#
#   main     -c 256 -np 16 --max-body 16384: every endpoint (the chat
#            page's headers, its ETag and HEAD too), the response
#            shapes, streaming framing, stop strings, seeds, n, logprobs,
#            token prompts, errors, limits, the prefix cache, 16 requests
#            at once against the same requests sent alone, metrics and
#            the access log
#   single   -c 4096 -np 1 --max-queue 1: a client that goes away while
#            its request decodes, waits in the queue or runs without
#            streaming; a full queue (429)
#   slow     -c 8192 -np 2 --timeout 1: the per-request deadline (504, and
#            an error event in a stream)
#   keys     --api-key twice: 401 without or with a wrong key, the chat
#            page without one; then SIGTERM
#            while a stream runs: /health says draining, new requests get
#            503, the stream ends normally, exit status 0
#   keyfile  --api-key-file with a comment and a blank line; --no-webui
#   tight    -c 256 -np 4 --kv-size 320: four requests that cannot all
#            grow at once in the pool give the texts they give alone;
#            grammars too ambiguous at their start (400 naming the field)
#   grace    -c 8192 -np 2 --grace 1: requests still running a second
#            after SIGTERM end (an error event in a stream, 503 without)
#   nan      stories260K with its output weights NaN: a failed generation
#            says what hearth run says
#   draft    -md (the model drafting for itself) and lookup --lookup 3:
#            speculation gives the greedy reference text, the usage
#            extension and the /metrics counters of speculation
#   think, think-opened, think-none, harmony, harmony-opened   templates
#            of reasoning models' shapes: reasoning_content apart from the
#            content (a grammar spells the reply), reasoning_effort,
#            harmony's tool calls, --reasoning-format none; where the
#            template opened the reasoning, a grammar or response_format
#            constrains the answer alone, and --reasoning-budget (or a
#            request's thinking_budget_tokens) ends the reasoning after
#            exactly that many tokens
#
# Every socket operation has a timeout and the whole script a time limit,
# so a server that hangs fails the test instead of hanging it; every
# server is killed at the end.  Each failed check prints a line starting
# "FAIL:" with what the server answered; the exit status is 1 if any
# check failed, else 0.

import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

SRCDIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEARTH = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HEARTH", os.path.join(SRCDIR, "src", "hearth"))
ONLY = sys.argv[2:]
DATA = os.environ.get("HEARTH_TEST_DATA") or os.path.join(SRCDIR, "..", "shared")
MODEL = os.path.join(DATA, "models", "stories260K.gguf")
REFERENCE = os.path.join(DATA, "reference", "stories260K-greedy.txt")
ALIAS = "stories260K"
IO_TIMEOUT = 20.0       # seconds, every socket operation
# The whole script's time limit guards against a hung server, not a slow
# one: alone the script takes about 10 s, about 60 s under ASan and UBSan,
# and eight copies at once under the sanitizers on two cores (far more
# load than make -j gives) take about 225 s each.
WALL_LIMIT = 420.0      # seconds, the whole script
THREADS = "2"           # every server's -t: the same work whatever the machine's size
SETTLE = 8.0            # seconds for the server to free a cancelled request
STARTUP = 60.0          # seconds for a server's "listening" line, and again for its /health 200
HEALTH_TIMEOUT = 5.0    # seconds, each /health poll while a server starts
NO_EOS = {"2": -100}    # token 2 is </s>: generation runs to max_tokens
SYSTEM = "You are a storyteller."
USER = "Tell me a story about a cat."
LONG = 4000             # max_tokens of the requests that are cancelled


# ---------------------------------------------------------------- checks

failures = []
out_lock = threading.Lock()
section_name = "-"


class Abort(Exception):
    """Ends the current section: what follows depends on what failed."""


def say(line):
    with out_lock:
        print(line, flush=True)


def ok(desc):
    say(f"ok: {section_name}: {desc}")


def fail(desc):
    failures.append(f"{section_name}: {desc}")
    say(f"FAIL: {section_name}: {desc}")


def check(cond, desc, detail=""):
    if cond:
        ok(desc)
    else:
        fail(f"{desc}: {detail}" if detail else desc)
    return bool(cond)


def need(cond, desc):
    if not cond:
        raise Abort(desc)


def short(data, n=600):
    if isinstance(data, (bytes, bytearray)):
        data = data.decode("utf-8", "replace")
    elif not isinstance(data, str):
        data = json.dumps(data)
    return data if len(data) <= n else data[:n] + "..."


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def wait_for(fn, timeout, interval=0.05):
    """Calls fn until it returns (True, value) or timeout passes; gives
    (done, last value)."""
    deadline = time.monotonic() + timeout
    while True:
        done, value = fn()
        if done or time.monotonic() > deadline:
            return done, value
        time.sleep(interval)


# ---------------------------------------------------------------- servers

def die_with_parent():
    """On Linux, a server gets SIGKILL when this script dies, even of
    SIGKILL itself."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Server:
    started = []

    def __init__(self, name, *args):
        self.name = name
        # the model and template unless args name their own
        model = [] if "-m" in args else ["-m", MODEL, "--chat-template", "chatml"]
        self.cmd = [HEARTH, "serve"] + model + ["-t", THREADS, "--host", "127.0.0.1", "--port", "0"] + list(args)
        self.port = None
        self.lines = []
        self.eof = False
        self.ready = None          # None: not yet waited for; else True/False
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, preexec_fn=die_with_parent)
        Server.started.append(self)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.cond:
                self.lines.append(line)
                if self.port is None:
                    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                    if m:
                        self.port = int(m.group(1))
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def log(self, n=15):
        with self.cond:
            tail = self.lines[-n:]
        return " | ".join(tail) if tail else "(nothing on stderr)"

    def wait_ready(self):
        if self.ready is not None:
            need(self.ready, f"server {self.name} did not start")
            return
        self.ready = False
        with self.cond:
            self.cond.wait_for(lambda: self.port is not None or self.eof, timeout=STARTUP)
            port = self.port
        need(port is not None, f"server {self.name} ({' '.join(self.cmd[1:])}) printed no "
             f"'listening on http://127.0.0.1:PORT' line; exit status {self.proc.poll()}; stderr: {self.log()}")
        seen = []
        SLOW_ANSWER = f"no answer in {HEALTH_TIMEOUT:.0f} s"

        def healthy():
            if self.proc.poll() is not None:
                seen.append(f"exited with status {self.proc.poll()}")
                return True, None
            try:
                r = request(self, "GET", "/health", timeout=HEALTH_TIMEOUT)
            except (socket.timeout, TimeoutError):
                seen.append(SLOW_ANSWER)   # not a wrong answer: a loaded machine
                return False, None
            except OSError as e:
                seen.append(f"{type(e).__name__}: {e}")
                return False, None
            seen.append(f"{r.status} {short(r.data, 80)}")
            return r.status == 200, r

        done, r = wait_for(healthy, STARTUP, 0.05)
        need(done and r is not None, f"server {self.name}: /health never answered 200 (last answers: "
             f"{seen[-3:]}); stderr: {self.log()}")
        odd = [s for s in seen[:-1] if not s.startswith("503") and s != SLOW_ANSWER]
        check(not odd, f"{self.name}: /health answers 503 until the model is loaded, then 200",
              f"answers before the 200: {odd[:3]}")
        alias = ALIAS
        if "-m" in self.cmd[3:]:   # a model of its own: named after its file
            alias = os.path.basename(self.cmd[self.cmd.index("-m", 3) + 1]).removesuffix(".gguf")
        # The server turns /health to 200, then prints its ready line: on a
        # busy machine the line may reach the reader thread a moment later.
        with self.cond:
            ready_line = self.cond.wait_for(
                lambda: any(re.search(r"hearth: serve: ready: model " + re.escape(alias) + r"\b", l)
                            for l in self.lines) or self.eof, timeout=STARTUP)
            ready_line = ready_line and any(
                re.search(r"hearth: serve: ready: model " + re.escape(alias) + r"\b", l) for l in self.lines)
        check(ready_line, f"{self.name}: stderr has a 'ready: model {alias}' line", self.log(5))
        self.ready = True

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def kill_all():
    for s in Server.started:
        s.kill()


# ---------------------------------------------------------------- HTTP

class Resp:
    def __init__(self, status, headers, data):
        self.status, self.headers, self.data = status, headers, data
        try:
            self.json = json.loads(data.decode("utf-8")) if data else None
        except ValueError:
            self.json = None

    def header(self, name):
        return self.headers.get(name.lower())

    def __str__(self):
        return f"HTTP {self.status} {short(self.data)}"


def request(srv, method, path, body=None, raw=None, key=None, headers=None, timeout=IO_TIMEOUT, conn=None):
    """One request with http.client; gives a Resp.  With conn, that
    (kept-alive) connection is used and left open."""
    c = conn or http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {}
    if data is not None:
        h["Content-Type"] = "application/json"
    if key:
        h["Authorization"] = f"Bearer {key}"
    h.update(headers or {})
    try:
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        payload = r.read()
        return Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, payload)
    finally:
        if conn is None:
            c.close()


def post(srv, path, body, **kw):
    return request(srv, "POST", path, body=body, **kw)


def ok_json(srv, path, body, what, **kw):
    """POSTs body, requires a 200 JSON answer, gives the JSON."""
    r = post(srv, path, body, **kw)
    need(r.status == 200 and isinstance(r.json, dict),
         f"{what}: expected 200 with a JSON object, got {r} for {short(body, 300)}")
    return r.json


class Raw:
    """One HTTP/1.1 request over a plain socket; the response is read and
    its chunked transfer coding decoded here, byte by byte."""

    def __init__(self, srv, path, body=None, raw=None, key=None, method="POST", timeout=IO_TIMEOUT,
                 headers=None):
        self.sock = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
        data = raw if raw is not None else json.dumps(body).encode()
        head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{srv.port}",
                "Content-Type: application/json", f"Content-Length: {len(data)}"]
        if key:
            head.append(f"Authorization: Bearer {key}")
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        try:
            self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # a server may answer (413) and close before reading it all
        self.buf = b""
        self.status = None
        self.headers = {}
        self.done = False
        self.problems = []

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError("the server closed the connection")
        self.buf += d

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def read_head(self):
        line = self._line().decode("latin-1")
        m = re.match(r"HTTP/(\d\.\d) (\d{3})(?: .*)?$", line)
        need(m, f"bad status line {line!r}")
        self.version, self.status = m.group(1), int(m.group(2))
        while True:
            line = self._line()
            if not line:
                break
            k, _, v = line.decode("latin-1").partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self.left = int(self.headers["content-length"]) if "content-length" in self.headers else None
        return self.status

    def part(self):
        """The next piece of the body; b"" at its end."""
        if self.done:
            return b""
        if self.chunked:
            line = self._line().decode("latin-1")
            try:
                size = int(line.split(";")[0].strip(), 16)
            except ValueError:
                raise Abort(f"bad chunk size line {line!r}")
            if size == 0:
                while self._line():
                    pass
                self.done = True
                return b""
            d = self._exact(size)
            tail = self._exact(2)
            if tail != b"\r\n":
                raise Abort(f"a chunk of {size} bytes is followed by {tail!r}, not CRLF")
            return d
        if self.left is not None:
            d = self._exact(self.left)
            self.done = True
            return d
        try:
            if not self.buf:
                self._fill()
        except EOFError:
            self.done = True
            return b""
        d, self.buf = self.buf, b""
        return d

    def body(self):
        parts = []
        while True:
            p = self.part()
            if not p:
                return b"".join(parts)
            parts.append(p)

    def events(self):
        """Yields the data of each event; framing problems go to
        self.problems."""
        pending = b""
        while True:
            while b"\n\n" not in pending:
                p = self.part()
                if not p:
                    if pending:
                        self.problems.append(f"the stream ends inside an event: {pending[:200]!r}")
                    return
                pending += p
            ev, pending = pending.split(b"\n\n", 1)
            if ev.startswith(b":") and b"\n" not in ev:
                continue   # a comment line, which SSE clients ignore
            if not ev.startswith(b"data: ") or b"\n" in ev or b"\r" in ev:
                self.problems.append(f"an event is not exactly 'data: ...\\n\\n': {ev[:200]!r}")
            try:
                yield ev[6:].decode("utf-8")
            except UnicodeDecodeError:
                self.problems.append(f"an event is not UTF-8: {ev[:200]!r}")
                yield ev[6:].decode("utf-8", "replace")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Stream:
    """A whole streamed response: status, headers, the events' data."""

    def __init__(self, srv, path, body, key=None):
        r = Raw(srv, path, body, key=key)
        try:
            self.status = r.read_head()
            self.version = r.version
            self.headers = r.headers
            self.chunked = r.chunked
            if self.status != 200:
                self.data = [r.body().decode("utf-8", "replace")]
                self.problems = []
                return
            self.data = list(r.events())
            self.problems = r.problems
            if r.buf:
                self.problems.append(f"bytes after the last chunk: {r.buf[:100]!r}")
        finally:
            r.close()

    def framing(self):
        """Problems with the HTTP framing and the event format."""
        p = list(self.problems)
        if self.status != 200:
            return [f"status {self.status}: {short(self.data[0])}"]
        if self.version != "1.1":
            p.append(f"HTTP/{self.version}, not HTTP/1.1")
        ct = self.headers.get("content-type", "")
        if not ct.startswith("text/event-stream"):
            p.append(f"Content-Type {ct!r}")
        if not self.chunked:
            p.append(f"not chunked (Transfer-Encoding {self.headers.get('transfer-encoding')!r})")
        if not self.data or self.data[-1] != "[DONE]":
            p.append(f"the last event is {short(self.data[-1], 200) if self.data else None!r}, not [DONE]")
        if self.data.count("[DONE]") != 1:
            p.append(f"{self.data.count('[DONE]')} [DONE] events")
        return p

    def chunks(self):
        """The JSON events before [DONE]; Abort on one that is not JSON."""
        out = []
        for d in self.data:
            if d == "[DONE]":
                break
            try:
                out.append(json.loads(d))
            except ValueError:
                raise Abort(f"an event is not JSON: {short(d, 200)!r}")
        return out


def chat_stream(chunks, n=1, include_usage=False, logprobs=False):
    """Checks the chunks of a chat stream; gives (texts, finish reasons,
    usage, problems)."""
    p = []
    texts = [None] * n
    finish = [None] * n
    usage = None
    first_id = chunks[0].get("id") if chunks else None
    if not (isinstance(first_id, str) and first_id.startswith("chatcmpl-")):
        p.append(f"id {first_id!r}")
    for k, c in enumerate(chunks):
        if "error" in c:
            p.append(f"an error event: {short(c)}")
            continue
        if c.get("object") != "chat.completion.chunk":
            p.append(f"object {c.get('object')!r}")
        if c.get("id") != first_id:
            p.append(f"chunk {k} has id {c.get('id')!r}, the first {first_id!r}")
        if c.get("model") != ALIAS:
            p.append(f"model {c.get('model')!r}")
        if not is_int(c.get("created")):
            p.append(f"created {c.get('created')!r}")
        last = k == len(chunks) - 1
        if include_usage:
            if "usage" not in c:
                p.append(f"chunk {k} has no usage key")
            elif last:
                usage = c["usage"]
                if c.get("choices") != []:
                    p.append(f"the usage chunk has choices {short(c.get('choices'), 200)}")
                p += usage_problems(usage)
                p += timings_problems((c.get("hearth") or {}).get("timings"), n)
                continue
            elif c["usage"] is not None:
                p.append(f"chunk {k} has usage {c['usage']!r} before the last")
        for ch in c.get("choices") or []:
            i = ch.get("index")
            if not (is_int(i) and 0 <= i < n):
                p.append(f"choice index {i!r}")
                continue
            delta = ch.get("delta")
            if not isinstance(delta, dict):
                p.append(f"delta {delta!r}")
                continue
            if "finish_reason" not in ch or "logprobs" not in ch:
                p.append(f"a chunk choice lacks finish_reason or logprobs: {short(ch, 200)}")
            if not logprobs and ch.get("logprobs") is not None:
                p.append(f"logprobs {short(ch.get('logprobs'), 100)} not asked for")
            if finish[i] is not None:
                p.append(f"choice {i} has a chunk after its finish chunk: {short(ch, 200)}")
            if texts[i] is None:
                if delta.get("role") != "assistant" or delta.get("content") != "":
                    p.append(f"the first chunk of choice {i} has delta {short(delta, 200)}, "
                             "not {\"role\":\"assistant\",\"content\":\"\"}")
                texts[i] = delta.get("content") or ""
                if ch.get("finish_reason") is not None:
                    finish[i] = ch["finish_reason"]
                continue
            if "role" in delta:
                p.append(f"a later chunk of choice {i} has a role: {short(delta, 200)}")
            if ch.get("finish_reason") is not None:
                finish[i] = ch["finish_reason"]
                if finish[i] not in ("stop", "length"):
                    p.append(f"finish_reason {finish[i]!r}")
                if delta != {}:
                    p.append(f"the finish chunk of choice {i} has delta {short(delta, 200)}, not {{}}")
            elif not isinstance(delta.get("content"), str):
                p.append(f"a content chunk of choice {i} has delta {short(delta, 200)}")
            if isinstance(delta.get("content"), str):
                texts[i] += delta["content"]
    for i in range(n):
        if texts[i] is None:
            p.append(f"choice {i} has no chunks")
        elif finish[i] is None:
            p.append(f"choice {i} has no finish chunk")
    if include_usage and usage is None:
        p.append("no usage chunk")
    return texts, finish, usage, p


def text_stream(chunks, n=1):
    """The same for a /v1/completions stream."""
    p = []
    texts = [""] * n
    finish = [None] * n
    first_id = chunks[0].get("id") if chunks else None
    if not (isinstance(first_id, str) and first_id.startswith("cmpl-")):
        p.append(f"id {first_id!r}")
    for c in chunks:
        if "error" in c:
            p.append(f"an error event: {short(c)}")
            continue
        if c.get("object") != "text_completion" or c.get("model") != ALIAS or c.get("id") != first_id:
            p.append(f"chunk {short(c, 200)}: object, model or id")
        for ch in c.get("choices") or []:
            i = ch.get("index")
            if not (is_int(i) and 0 <= i < n) or not isinstance(ch.get("text"), str):
                p.append(f"chunk choice {short(ch, 200)}")
                continue
            if finish[i] is not None:
                p.append(f"choice {i} has a chunk after its finish chunk")
            texts[i] += ch["text"]
            if ch.get("finish_reason") is not None:
                finish[i] = ch["finish_reason"]
    if None in finish:
        p.append(f"finish reasons {finish}")
    return texts, finish, p


def usage_problems(u):
    p = []
    if not isinstance(u, dict):
        return [f"usage {u!r}"]
    pt, ct, tt = u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens")
    if not (is_int(pt) and pt > 0 and is_int(ct) and ct >= 0 and is_int(tt)):
        p.append(f"usage {short(u, 200)}")
    elif tt != pt + ct:
        p.append(f"total_tokens {tt} != prompt_tokens {pt} + completion_tokens {ct}")
    d = u.get("prompt_tokens_details")
    if not (isinstance(d, dict) and is_int(d.get("cached_tokens"))
            and 0 <= d["cached_tokens"] <= (pt if is_int(pt) else 0)):
        p.append(f"prompt_tokens_details {d!r}")
    return p


def response_problems(j, kind, n=1):
    """Problems with the shape of a non-stream response; kind "chat" or
    "text"."""
    p = []
    prefix, obj = ("chatcmpl-", "chat.completion") if kind == "chat" else ("cmpl-", "text_completion")
    if not (isinstance(j.get("id"), str) and j["id"].startswith(prefix)):
        p.append(f"id {j.get('id')!r}")
    if j.get("object") != obj:
        p.append(f"object {j.get('object')!r}")
    if not (is_int(j.get("created")) and abs(j["created"] - time.time()) < 3600):
        p.append(f"created {j.get('created')!r}")
    if j.get("model") != ALIAS:
        p.append(f"model {j.get('model')!r}, not {ALIAS!r}")
    fp = j.get("system_fingerprint")
    if not (isinstance(fp, str) and fp.startswith("hearth-")):
        p.append(f"system_fingerprint {fp!r}")
    choices = j.get("choices")
    if not (isinstance(choices, list) and len(choices) == n):
        p.append(f"{len(choices) if isinstance(choices, list) else choices!r} choices, expected {n}")
        choices = []
    for i, ch in enumerate(choices):
        if ch.get("index") != i:
            p.append(f"choice {i} has index {ch.get('index')!r}")
        if kind == "chat":
            msg = ch.get("message")
            if not (isinstance(msg, dict) and msg.get("role") == "assistant" and isinstance(msg.get("content"), str)):
                p.append(f"message {short(msg, 200)}")
        elif not isinstance(ch.get("text"), str):
            p.append(f"text {ch.get('text')!r}")
        if "logprobs" not in ch:
            p.append(f"choice {i} has no logprobs key")
        if ch.get("finish_reason") not in ("stop", "length"):
            p.append(f"finish_reason {ch.get('finish_reason')!r}")
    p += usage_problems(j.get("usage"))
    h = j.get("hearth")
    if not (isinstance(h, dict) and is_int(h.get("seed")) and isinstance(h.get("sampling"), str)):
        p.append(f"hearth {h!r}")
    elif f"seed={h['seed']}" not in h["sampling"]:
        p.append(f"hearth.sampling {h['sampling']!r} does not say seed={h['seed']}")
    else:
        p += timings_problems(h.get("timings"), n)
    return p


def timings_problems(t, n):
    """hearth.timings: per choice, in order, the engine's times, each
    after the one before it."""
    if not (isinstance(t, list) and len(t) == n):
        return [f"hearth.timings {short(t, 200)} (want {n})"]
    p = []
    for i, x in enumerate(t):
        keys = ("queue_ms", "ttft_ms", "tpot_ms", "total_ms")
        if not (isinstance(x, dict) and x.get("index") == i and all(is_num(x.get(k)) for k in keys)):
            p.append(f"hearth.timings[{i}] {short(x, 200)}")
        elif not (0 <= x["queue_ms"] <= x["ttft_ms"] <= x["total_ms"] and x["tpot_ms"] >= 0):
            p.append(f"hearth.timings[{i}] out of order: {short(x, 200)}")
    return p


def content(j, i=0):
    return j["choices"][i]["message"]["content"]


def text(j, i=0):
    return j["choices"][i]["text"]


def chat_body(**kw):
    b = {"model": "gpt-4o", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
         "max_tokens": 12, "temperature": 0}
    b.update(kw)
    return {k: v for k, v in b.items() if v is not None}


def error_problems(r, status, code=None, param=None, etype=None):
    p = []
    if r.status != status:
        p.append(f"status {r.status}, expected {status}")
    if not (r.header("content-type") or "").startswith("application/json"):
        p.append(f"Content-Type {r.header('content-type')!r}")
    e = r.json.get("error") if isinstance(r.json, dict) else None
    if not (isinstance(e, dict) and isinstance(e.get("message"), str) and isinstance(e.get("type"), str)
            and "param" in e and "code" in e):
        p.append("not an OpenAI error object")
        return p + [f"body {short(r.data, 300)}"]
    if code is not None and e.get("code") != code:
        p.append(f"code {e.get('code')!r}, expected {code!r}")
    if param is not None and param.endswith("*"):
        if not str(e.get("param")).startswith(param[:-1]):
            p.append(f"param {e.get('param')!r}, expected {param[:-1]!r} or a part of it")
    elif param is not None and e.get("param") != param:
        p.append(f"param {e.get('param')!r}, expected {param!r}")
    if etype is not None and e.get("type") != etype:
        p.append(f"type {e.get('type')!r}, expected {etype!r}")
    if p:
        p.append(f"body {short(r.data, 300)}")
    return p


def expect_error(r, desc, status, code=None, param=None, etype=None):
    """r is a Resp, or a function giving one: then a connection that fails
    fails only this check."""
    if callable(r):
        try:
            r = r()
        except (OSError, EOFError, http.client.HTTPException) as e:
            return check(False, desc, f"no answer: {type(e).__name__}: {e}")
    p = error_problems(r, status, code, param, etype)
    return check(not p, desc, "; ".join(p))


# ---------------------------------------------------------------- metrics

class Metrics:
    SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?$")
    LABELS = re.compile(r'[ \t]*(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"[ \t]*(?:,[ \t]*|$))*')
    LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')

    def __init__(self, textdata):
        self.types = {}
        self.samples = {}
        self.problems = []
        for line in textdata.split("\n"):
            if not line.strip():
                continue
            if line.startswith("#"):
                f = line.split(None, 3)
                if len(f) >= 4 and f[1] == "TYPE":
                    self.types[f[2]] = f[3].strip()
                continue
            m = self.SAMPLE.match(line)
            if not m or (m.group(2) is not None and not self.LABELS.fullmatch(m.group(2))):
                self.problems.append(f"not a Prometheus sample line: {line!r}")
                continue
            labels = tuple(sorted(self.LABEL.findall(m.group(2) or "")))
            try:
                value = float(m.group(3))
            except ValueError:
                self.problems.append(f"bad value in {line!r}")
                continue
            self.samples[(m.group(1), labels)] = value

    def get(self, name, default=None, **labels):
        return self.samples.get((name, tuple(sorted(labels.items()))), default)

    def series(self, name):
        return [(dict(lab), v) for (n, lab), v in self.samples.items() if n == name]


GAUGES = ["hearth_requests_running", "hearth_requests_waiting", "hearth_kv_blocks_used",
          "hearth_kv_blocks_cached", "hearth_kv_blocks_total"]
COUNTERS = ["hearth_prompt_tokens_total", "hearth_prompt_tokens_cached_total", "hearth_generated_tokens_total",
            "hearth_prefix_cache_queries_total", "hearth_prefix_cache_hits_total", "hearth_preemptions_total"]
HISTOGRAMS = ["hearth_time_to_first_token_seconds", "hearth_time_per_output_token_seconds",
              "hearth_request_duration_seconds", "hearth_queue_time_seconds"]


def metrics(srv, key=None):
    r = request(srv, "GET", "/metrics", key=key)
    need(r.status == 200, f"/metrics: {r}")
    m = Metrics(r.data.decode("utf-8", "replace"))
    m.content_type = r.header("content-type") or ""
    return m


def finished(m, reason):
    return m.get("hearth_requests_total", 0.0, finish_reason=reason)


def metrics_problems(m):
    """The names of the spec, their types, histogram consistency."""
    p = list(m.problems)
    for g in GAUGES:
        if m.get(g) is None:
            p.append(f"no {g}")
        elif m.types.get(g) != "gauge":
            p.append(f"{g} has TYPE {m.types.get(g)!r}")
    for c in COUNTERS + ["hearth_requests_total", "hearth_http_responses_total"]:
        if c not in m.types and not m.series(c):
            p.append(f"no {c}")
        elif m.types.get(c) != "counter":
            p.append(f"{c} has TYPE {m.types.get(c)!r}")
    for c in COUNTERS:
        if m.get(c) is None:
            p.append(f"no unlabelled sample of {c}")
    for lab, _ in m.series("hearth_requests_total"):
        if set(lab) != {"finish_reason"} or lab["finish_reason"] not in ("stop", "length", "cancelled",
                                                                          "error", "timeout"):
            p.append(f"hearth_requests_total with labels {lab}")
    for h in HISTOGRAMS:
        if m.types.get(h) != "histogram":
            p.append(f"{h} has TYPE {m.types.get(h)!r}")
        buckets = sorted(((float(lab["le"]), v) for lab, v in m.series(h + "_bucket") if "le" in lab))
        count, total = m.get(h + "_count"), m.get(h + "_sum")
        if not buckets or buckets[-1][0] != float("inf"):
            p.append(f"{h}_bucket has no le=\"+Inf\"")
        elif count is None or total is None:
            p.append(f"{h} lacks _count or _sum")
        else:
            if buckets[-1][1] != count:
                p.append(f"{h}: the +Inf bucket {buckets[-1][1]} != _count {count}")
            if any(a[1] > b[1] for a, b in zip(buckets, buckets[1:])):
                p.append(f"{h}: the buckets are not cumulative")
            if total < 0:
                p.append(f"{h}_sum {total} < 0")
    used, total = m.get("hearth_kv_blocks_used"), m.get("hearth_kv_blocks_total")
    if used is not None and total is not None and not (total > 0 and 0 <= used <= total):
        p.append(f"hearth_kv_blocks_used {used}, hearth_kv_blocks_total {total}")
    return p


# ---------------------------------------------------------------- servers used

key_file = tempfile.NamedTemporaryFile("w", prefix="hearth-keys.", suffix=".txt", delete=False)
key_file.write("# the keys of the test\n\n  \nk-file\n")
key_file.close()

def nan_model():
    """A copy of the model whose output weights are all NaN (F32 bytes
    0xff), so that every logit is NaN; its path (removed at the end)."""
    info = json.loads(subprocess.run([HEARTH, "inspect", "--json", MODEL], capture_output=True,
                                     check=True, timeout=60).stdout)
    t = next(t for t in info["tensors"] if t["name"] == "output.weight")
    fd, path = tempfile.mkstemp(prefix="hearth-nan.", suffix=".gguf")
    with open(MODEL, "rb") as f:
        data = bytearray(f.read())
    start = info["data_offset"] + t["offset"]
    data[start:start + t["bytes"]] = b"\xff" * t["bytes"]
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    made_files.append(path)
    return path


made_files = []   # removed at the end

SERVERS = {
    "main": ["-c", "256", "-np", "16", "--max-body", "16384"],
    "single": ["-c", "4096", "-np", "1", "--max-queue", "1"],
    "slow": ["-c", "8192", "-np", "2", "--timeout", "1"],
    "keys": ["-c", "1280", "-np", "2", "--api-key", "k-one", "--api-key", "k-two"],
    "keyfile": ["-c", "256", "-np", "1", "--api-key-file", key_file.name, "--no-webui"],
    "tight": ["-c", "256", "-np", "4", "--kv-size", "320"],
    "http": ["-c", "256", "-np", "2", "--max-connections", "8", "--idle-timeout", "5", "--request-timeout", "3",
             "--max-body", "4096"],
    "grace": ["-c", "8192", "-np", "2", "--grace", "1"],
    "draft": ["-c", "512", "-np", "4", "-md", MODEL, "--draft-max", "6", "--draft-p-min", "0"],
    "lookup": ["-c", "512", "-np", "4", "--lookup", "3", "--draft-fixed"],
    # a function: the model is made when the server starts
    "nan": lambda: ["-m", nan_model(), "--chat-template", "chatml", "-c", "256", "-np", "1"],
    # random weights, each with a template of one tool-call format
    "tools-hermes": ["-m", os.path.join(DATA, "models", "micro-qwen2-Q8_0.gguf"), "--chat-template",
                     os.path.join(DATA, "chat", "Qwen-Qwen2.5-7B-Instruct.jinja"), "-c", "2048", "-np", "2"],
    "tools-llama3": ["-m", os.path.join(DATA, "models", "micro-llama-Q8_0.gguf"), "--chat-template",
                     os.path.join(DATA, "chat", "meta-llama-Llama-3.1-8B-Instruct.jinja"), "-c", "2048", "-np", "2"],
    "tools-mistral": ["-m", os.path.join(DATA, "models", "micro-llama-Q8_0.gguf"), "--chat-template",
                      os.path.join(DATA, "chat", "mistralai-Mistral-Nemo-Instruct-2407.jinja"), "-c", "2048",
                      "-np", "2"],
    "tools-kimi": lambda: ["-m", os.path.join(DATA, "models", "micro-qwen2-Q8_0.gguf"), "--chat-template",
                           template_file(KIMI_TOOLS_TEMPLATE), "-c", "2048", "-np", "2"],
}
# Kimi-K2's tool-call syntax: a section of calls, each under the id
# functions.NAME:K, which comes back before the call's result
KIMI_TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{% endif -%}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}<|im_assistant|>assistant<|im_middle|>{{ m.content or '' }}"
    "{%- if m.tool_calls %}<|tool_calls_section_begin|>{% for c in m.tool_calls %}<|tool_call_begin|>{{ c.id }}"
    "<|tool_call_argument_begin|>{{ c.function.arguments }}<|tool_call_end|>{% endfor %}"
    "<|tool_calls_section_end|>{% endif %}"
    "{%- elif m.role == 'tool' %}<|im_system|>tool<|im_middle|>## Return of {{ m.tool_call_id }}\n{{ m.content }}"
    "{%- else %}<|im_user|>{{ m.role }}<|im_middle|>{{ m.content }}{% endif %}<|im_end|>"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_assistant|>assistant<|im_middle|>{% endif %}")
servers = {}
sections = []


def section(server):
    def register(fn):
        sections.append((fn.__name__.replace("_", "-"), server, fn))
        return fn
    return register


def srv(name):
    s = servers[name]
    s.wait_ready()
    need(s.alive(), f"server {name} is no longer running (exit status {s.proc.poll()}); stderr: {s.log(5)}")
    return s


# ---------------------------------------------------------------- main server

@section("main")
def endpoints():
    s = srv("main")
    r = request(s, "GET", "/health")
    check(r.status == 200 and r.json == {"status": "ok"}, "GET /health: 200 {\"status\":\"ok\"}", str(r))
    check((r.header("content-type") or "").startswith("application/json"), "/health is application/json",
          repr(r.header("content-type")))

    r = request(s, "GET", "/v1/models")
    j = r.json
    good = (r.status == 200 and isinstance(j, dict) and j.get("object") == "list"
            and isinstance(j.get("data"), list) and len(j["data"]) == 1)
    d = j["data"][0] if good else {}
    check(good and d.get("id") == ALIAS and d.get("object") == "model" and d.get("owned_by") == "hearth"
          and is_int(d.get("created")), f"GET /v1/models lists {ALIAS}", str(r))

    j = ok_json(s, "/tokenize", {"content": "Once upon a time"}, "/tokenize")
    check(j.get("tokens") == [403, 407, 261, 378], "/tokenize: the ids of 'Once upon a time', no BOS",
          short(j))
    j = ok_json(s, "/tokenize", {"content": "Once upon a time", "add_special": True}, "/tokenize add_special")
    check(j.get("tokens") == [1, 403, 407, 261, 378], "/tokenize add_special: BOS first", short(j))
    j = ok_json(s, "/tokenize", {"content": "Once upon a time", "with_pieces": True}, "/tokenize with_pieces")
    want = [{"id": 403, "piece": " Once"}, {"id": 407, "piece": " upon"}, {"id": 261, "piece": " a"},
            {"id": 378, "piece": " time"}]
    check(j.get("tokens") == want, "/tokenize with_pieces: ids and pieces", short(j))
    j = ok_json(s, "/tokenize", {"content": "<s>Once"}, "/tokenize special")
    check(j.get("tokens", [None])[0] == 1, "/tokenize parses special-token text by default", short(j))
    j = ok_json(s, "/tokenize", {"content": "<s>Once", "parse_special": False}, "/tokenize parse_special")
    check(1 not in j.get("tokens", [1]), "/tokenize parse_special false: <s> is plain text", short(j))
    expect_error(post(s, "/tokenize", {"text": "x"}), "/tokenize without content: 400 param content", 400,
                 param="content", etype="invalid_request_error")
    expect_error(post(s, "/tokenize", {"content": 5}), "/tokenize content 5: 400 param content", 400,
                 param="content")

    j = ok_json(s, "/detokenize", {"tokens": [403, 407, 261, 378]}, "/detokenize")
    check(j.get("content") in ("Once upon a time", " Once upon a time"), "/detokenize: 'Once upon a time'",
          short(j))
    r = post(s, "/detokenize", {"tokens": "403"})
    check(r.status == 400 and isinstance(r.json, dict) and str((r.json.get("error") or {}).get("param"))
          .startswith("tokens"), "/detokenize tokens '403': 400 param tokens", str(r))
    r = post(s, "/detokenize", {"tokens": [403, 99999]})
    check(r.status == 400 and isinstance(r.json, dict) and str((r.json.get("error") or {}).get("param"))
          .startswith("tokens"), "/detokenize an id beyond the vocabulary: 400 param tokens", str(r))

    m = metrics(s)
    check("text/plain" in m.content_type and "version=0.0.4" in m.content_type,
          "/metrics is text/plain; version=0.0.4", repr(m.content_type))
    p = metrics_problems(m)
    check(not p, "/metrics parses as Prometheus text with the names of the spec", "; ".join(p[:8]))

    # Two requests on one kept-alive HTTP/1.1 connection.
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=IO_TIMEOUT)
    try:
        r1 = request(s, "GET", "/health", conn=c)
        r2 = request(s, "POST", "/tokenize", body={"content": "Once"}, conn=c)
        check(r1.status == 200 and r2.status == 200 and r2.json == {"tokens": [403]},
              "two requests on one kept-alive connection", f"{r1}; {r2}")
    except (OSError, http.client.HTTPException) as e:
        fail(f"two requests on one kept-alive connection: {type(e).__name__}: {e}")
    finally:
        c.close()


@section("main")
def chat_page():
    s = srv("main")
    r = request(s, "GET", "/")
    page = r.data.decode("utf-8", "replace")
    check(r.status == 200 and r.header("content-type") == "text/html; charset=utf-8",
          "GET /: 200 text/html; charset=utf-8", f"{r.status} {r.header('content-type')!r}")
    check(page.startswith("<!DOCTYPE html>") and "</html>" in page and "v1/chat/completions" in page,
          "GET /: the chat page, whole", short(page, 200))
    csp = r.header("content-security-policy") or ""
    directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in csp.split(";") if d.strip())
    check(directives.get("default-src") == "'none'" and directives.get("connect-src") == "'self'"
          and directives.get("frame-ancestors") == "'none'" and "http" not in csp and "*" not in csp,
          "GET /: a Content-Security-Policy that allows no other origin", repr(csp))
    check(not re.search(r"""\b(?:src|href|action)\s*=\s*["']?(?!data:)[^"'\s>]""", page) and "@import" not in page
          and "url(" not in page, "the page loads nothing but itself", "a src, href, action, @import or url()")
    check(r.header("x-content-type-options") == "nosniff" and r.header("cache-control") == "no-cache",
          "GET /: nosniff and Cache-Control: no-cache", f"{r.headers}")
    etag = r.header("etag") or ""
    check(re.fullmatch(r'"[!#-~]+"', etag) is not None, "GET /: a strong ETag", repr(etag))
    r2 = request(s, "GET", "/index.html")
    check(r2.status == 200 and r2.data == r.data and r2.header("etag") == etag, "GET /index.html: the same page",
          f"{r2.status}, {len(r2.data)} bytes")
    r2 = request(s, "GET", "/?from=bookmark")
    check(r2.status == 200 and r2.data == r.data, "GET /?query: the page (the query is not part of the path)",
          str(r2.status))
    r2 = request(s, "HEAD", "/")
    check(r2.status == 200 and r2.data == b"" and r2.header("content-length") == str(len(r.data))
          and r2.header("etag") == etag, "HEAD /: the head of GET /, no body",
          f"{r2.status} length {r2.header('content-length')} body {len(r2.data)}")
    for inm in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        r2 = request(s, "GET", "/", headers={"If-None-Match": inm})
        check(r2.status == 304 and r2.data == b"" and r2.header("content-length") is None
              and r2.header("etag") == etag, f"If-None-Match {inm}: 304 with the ETag, no body and no length",
              f"{r2.status} {r2.headers}")
    for inm in ('"other"', etag[:-2] + '"', etag + "x"):
        r2 = request(s, "GET", "/", headers={"If-None-Match": inm})
        check(r2.status == 200 and r2.data == r.data, f"If-None-Match {inm}: the page again", str(r2.status))
    expect_error(request(s, "POST", "/", body={}), "POST /: 405", 405, code="method_not_allowed")
    check(request(s, "POST", "/", body={}).header("allow") == "GET", "POST /: Allow: GET")
    for path in ("/index.htm", "/chat.html", "//", "/index.html/"):
        expect_error(request(s, "GET", path), f"GET {path}: 404", 404, code="not_found")


@section("main")
def chat():
    s = srv("main")
    r = post(s, "/v1/chat/completions", chat_body())
    need(r.status == 200 and isinstance(r.json, dict), f"greedy chat request: {r}")
    check((r.header("content-type") or "").startswith("application/json"), "chat response is application/json",
          repr(r.header("content-type")))
    j = r.json
    p = response_problems(j, "chat")
    check(not p, "chat response shape (id, object, created, model, choices, usage, hearth)",
          "; ".join(p) + f" in {short(j)}")
    need(not p, "the chat response has the wrong shape")
    check(j["choices"][0]["logprobs"] is None, "logprobs null when not asked for", short(j["choices"][0]))
    u = j["usage"]
    check(u["completion_tokens"] <= 12 and (j["choices"][0]["finish_reason"] == "stop"
                                            or u["completion_tokens"] == 12),
          "finish_reason length means max_tokens tokens", short(j))

    # The same conversation through hearth run --chat: the same greedy text
    # and the same number of prompt tokens.
    cli = subprocess.run([HEARTH, "run", "-m", MODEL, "--chat", "--chat-template", "chatml", "--system", SYSTEM,
                          "-p", USER, "-n", "12", "--temp", "0", "-v"], capture_output=True, timeout=60)
    want = cli.stdout.decode("utf-8", "replace")
    m = re.search(r"prompt (\d+) tokens \(chat template\)", cli.stderr.decode("utf-8", "replace"))
    if cli.returncode == 0 and m:
        check(content(j).rstrip("\n") == want.rstrip("\n"), "the greedy reply is the one hearth run --chat gives",
              f"server {content(j)!r}, hearth run {want!r}")
        check(u["prompt_tokens"] == int(m.group(1)), "prompt_tokens is the count hearth run --chat gives",
              f"server {u['prompt_tokens']}, hearth run {m.group(1)}")
    else:
        fail(f"hearth run --chat failed (status {cli.returncode}): {short(cli.stderr)}")

    j2 = ok_json(s, "/v1/chat/completions", chat_body(logit_bias=NO_EOS), "chat with EOS banned")
    check(j2["choices"][0]["finish_reason"] == "length" and j2["usage"]["completion_tokens"] == 12,
          "EOS banned: finish_reason length after max_tokens tokens", short(j2))
    j3 = ok_json(s, "/v1/chat/completions", chat_body(max_tokens=None, max_completion_tokens=5, logit_bias=NO_EOS),
                 "max_completion_tokens")
    check(j3["usage"]["completion_tokens"] == 5, "max_completion_tokens limits the reply", short(j3))

    parts = chat_body(messages=[{"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
                                {"role": "user", "content": [{"type": "text", "text": USER}]}])
    j4 = ok_json(s, "/v1/chat/completions", parts, "content as text parts")
    check(content(j4) == content(j) and j4["usage"]["prompt_tokens"] == u["prompt_tokens"],
          "content as an array of text parts is the same conversation",
          f"{content(j4)!r}, {j4['usage']['prompt_tokens']} prompt tokens vs {content(j)!r}, {u['prompt_tokens']}")

    conv = chat_body(messages=[{"role": "user", "content": "Hi", "name": "tom"},
                               {"role": "assistant", "content": None},
                               {"role": "user", "content": "Tell me more."}])
    r = post(s, "/v1/chat/completions", conv)
    check(r.status == 200, "a message with name and an assistant message with content null", str(r))

    for desc, extra in [("unknown fields are ignored", {"frobnicate": {"x": 1}, "logit_bias": {}}),
                        ("response_format text", {"response_format": {"type": "text"}}),
                        ("tools []", {"tools": []}),
                        ("tool_choice none", {"tool_choice": "none"}),
                        ("tool_choice auto", {"tool_choice": "auto"}),
                        ("user string", {"user": "someone"}),
                        ("prompt_cache_key string", {"prompt_cache_key": "conversation-1"}),
                        ("stream false", {"stream": False})]:
        r = post(s, "/v1/chat/completions", chat_body(max_tokens=2, **extra))
        check(r.status == 200, f"{desc}: 200", str(r))


@section("main")
def structured():
    """response_format json_object and json_schema, and the grammar
    extension: outputs sampled at temperature 1 are valid by construction,
    streamed or not; schemas and grammars that cannot compile are 400s
    naming what is wrong."""
    s = srv("main")
    cc = "/v1/chat/completions"
    for seed in range(1, 4):
        j = ok_json(s, cc, chat_body(max_tokens=256, temperature=1, seed=seed,
                                     response_format={"type": "json_object"}), "json_object")
        c = content(j)
        try:
            v = json.loads(c)
            check(isinstance(v, dict), f"json_object seed {seed}: an object", short(c))
        except ValueError:
            check(j["choices"][0]["finish_reason"] == "length", f"json_object seed {seed}: JSON unless cut short",
                  short(c))
    # small enough that whitespace cannot take it past the token limit
    schema = {"type": "object",
              "properties": {"name": {"type": "string", "maxLength": 4},
                             "n": {"type": "integer", "minimum": 1, "maximum": 9}},
              "required": ["name", "n"], "additionalProperties": False}

    def valid(v):
        return (isinstance(v, dict) and set(v) == {"name", "n"} and isinstance(v.get("name"), str)
                and len(v["name"]) <= 4 and isinstance(v.get("n"), int) and 1 <= v["n"] <= 9)
    rf = {"type": "json_schema", "json_schema": {"name": "thing", "schema": schema, "strict": True}}
    for seed in range(1, 4):
        j = ok_json(s, cc, chat_body(max_tokens=256, temperature=1, seed=seed, response_format=rf), "json_schema")
        c = content(j)
        fr = j["choices"][0]["finish_reason"]
        check(fr == "stop", f"json_schema seed {seed}: finish_reason stop", fr)
        try:
            v = json.loads(c)
        except ValueError:
            v = None
        check(valid(v), f"json_schema seed {seed}: the content validates", short(c))
    # the same, streamed: the deltas join to a valid document
    st = Stream(s, cc, chat_body(max_tokens=256, temperature=1, seed=7, response_format=rf, stream=True))
    check(not st.framing(), "json_schema streamed: framing", "; ".join(st.framing()))
    joined = ""
    for ev in st.chunks():
        for ch in ev.get("choices", []):
            joined += (ch.get("delta") or {}).get("content") or ""
    try:
        v = json.loads(joined)
    except ValueError:
        v = None
    check(valid(v), "json_schema streamed: the joined deltas validate", short(joined))
    # the grammar extension, on both endpoints
    g = 'root ::= [1-9] [0-9]{0,2} (" + " [1-9] [0-9]{0,2}){0,3} " ="'
    for seed in range(1, 4):
        j = ok_json(s, cc, chat_body(max_tokens=100, temperature=1, seed=seed, grammar=g), "grammar")
        c = content(j)
        check(re.fullmatch(r"[1-9][0-9]{0,2}( \+ [1-9][0-9]{0,2}){0,3} =", c) is not None,
              f"grammar seed {seed}: the content is in the language", repr(c))
        j = ok_json(s, "/v1/completions", {"prompt": "Once", "max_tokens": 100, "temperature": 1, "seed": seed,
                                           "grammar": g}, "completion grammar")
        check(re.fullmatch(r"[1-9][0-9]{0,2}( \+ [1-9][0-9]{0,2}){0,3} =", text(j)) is not None,
              f"completion grammar seed {seed}: the text is in the language", repr(text(j)))
    r = post(s, cc, chat_body(response_format={"type": "json_schema",
                                                "json_schema": {"schema": {"type": "string", "multipleOf": 3}}}))
    e = r.json.get("error", {}) if isinstance(r.json, dict) else {}
    check(r.status == 400 and "multipleOf" in (e.get("message") or ""), "an unsupported keyword is named",
          short(r.json))
    r = post(s, cc, chat_body(grammar="root ::= \"a\"\nx ::= [a-"))
    e = r.json.get("error", {}) if isinstance(r.json, dict) else {}
    check(r.status == 400 and "line 2, column 7" in (e.get("message") or ""),
          "a grammar error gives its line and column", short(r.json))


# Tool calls on random-weight models: with tool_choice "required" or a
# named function the grammar must force a well-formed call in the
# template's format whatever the weights, and the answer must be an
# OpenAI tool call whose arguments follow the tool's schema.
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "maxLength": 8},
                                      "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                       "required": ["city", "days"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "ping", "description": "Checks the line"}},
]
TOOL_MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def ambiguous_alternatives(n):
    """n alternatives that all accept "a" first, each through a byte set
    of its own, so that merging alternatives with a common beginning
    cannot join them: n readings at once after the "a"."""
    alts = []
    for i in range(n):
        alts.append(f'[a{chr(98 + i % 25)}{chr(65 + (i // 25) % 26)}{(i // 650) % 10}] "{i}"')
    return " | ".join(alts)


@section("tight")
def grammar_limit_at_start():
    # A grammar with more ways to begin than the matcher keeps is refused
    # when the request is submitted: the error names the grammar's field,
    # not the context's length.  (On a server whose --max-body takes it.)
    s = srv("tight")
    b = {"prompt": "Once", "max_tokens": 4}
    expect_error(post(s, "/v1/completions", dict(b, grammar="root ::= " + ambiguous_alternatives(5000))),
                 "5000 ways to begin a GBNF grammar: 400 naming grammar", 400, "invalid_value", "grammar")


@section("tight")
def grammar_limit_later():
    # The same limit reached only after the first token: still the
    # request's fault, named the same way; streamed, it is the error
    # event after the 200.
    s = srv("tight")
    g = 'root ::= "{" (' + ambiguous_alternatives(5000) + ")"
    b = {"prompt": "Once", "max_tokens": 8, "grammar": g}
    expect_error(post(s, "/v1/completions", b),
                 "a grammar too ambiguous after its first byte: 400 naming grammar", 400, "invalid_value", "grammar")
    st = Stream(s, "/v1/completions", dict(b, stream=True))
    errs = [ev["error"] for ev in st.chunks() if isinstance(ev, dict) and "error" in ev]
    check(st.status == 200 and len(errs) == 1 and errs[0].get("code") == "invalid_value"
          and errs[0].get("param") == "grammar",
          "streamed: one error event, invalid_value naming grammar", short(errs))


@section("tight")
def wide_enum():
    # An enum of 6,000 strings (all beginning with a quote, many with a
    # longer common prefix) is served, streamed or not: the matcher keeps
    # one way to continue per distinct next byte, not one per string.
    s = srv("tight")
    values = [f"v{i % 97}_{i:04d}" for i in range(6000)]
    schema = {"type": "object", "properties": {"k": {"enum": values}}, "required": ["k"],
              "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "wide", "schema": schema}}
    allowed = set(values)
    for seed in (1, 2):
        b = {"prompt": "Once", "max_tokens": 60, "temperature": 1, "seed": seed, "response_format": rf}
        j = ok_json(s, "/v1/completions", b, f"enum of 6000 strings, seed {seed}")
        try:
            v = json.loads(text(j))
        except (TypeError, ValueError):
            v = None
        check(isinstance(v, dict) and v.get("k") in allowed and j["choices"][0]["finish_reason"] == "stop",
              f"enum of 6000 strings, seed {seed}: the text is one of them", short(j))
        st = Stream(s, "/v1/completions", dict(b, stream=True))
        check(not st.framing(), f"enum of 6000 strings streamed, seed {seed}: framing", "; ".join(st.framing()))
        joined = "".join(ch.get("text") or "" for ev in st.chunks() for ch in ev.get("choices", []))
        check(joined == text(j), f"enum of 6000 strings streamed, seed {seed}: the same text",
              f"{short(joined)} vs {short(text(j))}")


def tool_args_valid(name, args):
    """Whether the arguments (a JSON string) follow the schema of the tool."""
    try:
        v = json.loads(args)
    except (TypeError, ValueError):
        return False
    if name == "ping":
        return v == {}
    return (name == "get_weather" and isinstance(v, dict) and set(v) == {"city", "days"}
            and isinstance(v["city"], str) and len(v["city"]) <= 8 and is_int(v["days"]) and 1 <= v["days"] <= 7)


def tool_id_ok(fmt, i):
    if fmt == "mistral":   # Mistral's template takes nine letters and digits
        return isinstance(i, str) and re.fullmatch(r"[A-Za-z0-9]{9}", i) is not None
    if fmt == "kimi":      # the model's own: functions.NAME:K
        return isinstance(i, str) and re.fullmatch(r"functions\.[A-Za-z_]+:[0-9]+", i) is not None
    return isinstance(i, str) and re.fullmatch(r"call_[A-Za-z0-9]{24}", i) is not None


def tool_calls_section(name, fmt):
    s = srv(name)
    cc = "/v1/chat/completions"
    check(any(f"tool calls: {fmt}" in l for l in s.lines), f"the ready line names the {fmt} format", s.log(3))
    body = {"messages": TOOL_MESSAGES, "tools": TOOLS, "max_tokens": 400, "temperature": 1}
    named = {"type": "function", "function": {"name": "get_weather"}}
    answers = []
    for desc, choice, seeds in (("required", "required", (1, 2)), ("named", named, (3,))):
        for seed in seeds:
            j = ok_json(s, cc, dict(body, tool_choice=choice, seed=seed), f"tool_choice {desc}")
            ch = j["choices"][0]
            m = ch.get("message") or {}
            calls = m.get("tool_calls")
            check(ch.get("finish_reason") == "tool_calls", f"{desc} seed {seed}: finish_reason tool_calls",
                  short(ch))
            check(m.get("role") == "assistant" and m.get("content") is None,
                  f"{desc} seed {seed}: content null", short(m))
            # parallel_tool_calls (the default): one call or more
            good = isinstance(calls, list) and len(calls) >= 1 and all(isinstance(c, dict) for c in calls)
            check(good, f"{desc} seed {seed}: tool calls", short(m))
            if not good:
                continue
            for c in calls:
                fn = c.get("function") or {}
                check(tool_id_ok(fmt, c.get("id")) and c.get("type") == "function",
                      f"{desc} seed {seed}: the call's id and type", short(c))
                check(isinstance(fn.get("arguments"), str) and tool_args_valid(fn.get("name"), fn.get("arguments")),
                      f"{desc} seed {seed}: the arguments are a JSON string that follows the schema", short(c))
                if choice is named:
                    check(fn.get("name") == "get_weather", f"named seed {seed}: the named function", short(c))
            if len(calls) == 1:
                answers.append(m)
            # parallel_tool_calls false: exactly one
            one = ok_json(s, cc, dict(body, tool_choice=choice, seed=seed, parallel_tool_calls=False),
                          f"tool_choice {desc}, parallel_tool_calls false")["choices"][0]
            oc = (one.get("message") or {}).get("tool_calls")
            check(isinstance(oc, list) and len(oc) == 1 and one.get("finish_reason") == "tool_calls"
                  and tool_args_valid((oc[0].get("function") or {}).get("name"),
                                      (oc[0].get("function") or {}).get("arguments")),
                  f"{desc} seed {seed}, parallel_tool_calls false: one call", short(one))

    # streamed: the role chunk, then per call its id, type and name with
    # empty arguments, then the arguments as they are generated; the
    # finish is tool_calls
    st = Stream(s, cc, dict(body, tool_choice=named, seed=4, stream=True))
    check(not st.framing(), "named, streamed: framing", "; ".join(st.framing()))
    chunks = st.chunks()
    p, calls, finish, content, n_deltas = [], {}, None, "", {}
    for k, c in enumerate(chunks):
        for ch in c.get("choices") or []:
            d = ch.get("delta") or {}
            if k == 0:
                if d != {"role": "assistant", "content": ""}:
                    p.append(f"first delta {short(d, 200)}")
                continue
            content += d.get("content") or ""
            for t in d.get("tool_calls") or []:
                i = t.get("index")
                if i not in calls:
                    f0 = t.get("function") or {}
                    if not (tool_id_ok(fmt, t.get("id")) and t.get("type") == "function"
                            and isinstance(f0.get("name"), str) and f0.get("arguments") == ""):
                        p.append(f"the first delta of call {i}: {short(t, 200)}")
                    calls[i] = {"name": f0.get("name"), "arguments": ""}
                else:
                    if set(t) != {"index", "function"} or set(t["function"]) != {"arguments"}:
                        p.append(f"a later delta of call {i}: {short(t, 200)}")
                    calls[i]["arguments"] += (t.get("function") or {}).get("arguments") or ""
                    n_deltas[i] = n_deltas.get(i, 0) + 1
            if ch.get("finish_reason") is not None:
                finish = ch["finish_reason"]
    check(not p, "named, streamed: the deltas have the OpenAI shape", "; ".join(p))
    check(finish == "tool_calls", "named, streamed: finish_reason tool_calls", repr(finish))
    check(content == "", "named, streamed: no content", repr(content))
    check(sorted(calls) == list(range(len(calls))) and len(calls) >= 1
          and all(c["name"] == "get_weather" and tool_args_valid("get_weather", c["arguments"]) for c in calls.values()),
          "named, streamed: calls whose joined arguments follow the schema", short(calls))
    check(n_deltas.get(0, 0) > 1, "named, streamed: the arguments come in more than one delta",
          f"{n_deltas} deltas; {short(calls)}")
    # the same seed not streamed: the same calls
    m = ok_json(s, cc, dict(body, tool_choice=named, seed=4), "named, seed 4")["choices"][0].get("message") or {}
    whole = [{"name": (c.get("function") or {}).get("name"), "arguments": (c.get("function") or {}).get("arguments")}
             for c in m.get("tool_calls") or []]
    check(whole == [calls[i] for i in sorted(calls)], "named, streamed: the joined arguments are the non-streamed ones",
          f"{short(whole)} vs {short(calls)}")

    # several calls in one turn: with the end of text banned the grammar
    # of one call or more goes on to a second; streamed, the calls come
    # with indices 0, 1, ... and add up to the non-streamed ones; with
    # parallel_tool_calls false there is one call and the reply ends
    # (where the format closes its calls, as mistral's and kimi's do, the
    # model may choose to close after one: the first seed of a few that
    # gives two)
    for seed in range(5, 13):
        sev = dict(body, tool_choice="required", seed=seed, max_tokens=240, logit_bias={"2": -100})
        ch = ok_json(s, cc, sev, "several calls")["choices"][0]
        if len((ch.get("message") or {}).get("tool_calls") or []) >= 2:
            break
    whole = [{"name": (c.get("function") or {}).get("name"), "arguments": (c.get("function") or {}).get("arguments")}
             for c in (ch.get("message") or {}).get("tool_calls") or []]
    check(len(whole) >= 2 and ch.get("finish_reason") == "tool_calls"
          and tool_args_valid(whole[0]["name"], whole[0]["arguments"]),
          "required, the end banned: two calls or more", short(ch))
    got, ids = {}, {}
    for c in Stream(s, cc, dict(sev, stream=True)).chunks():
        for x in c.get("choices") or []:
            for t in (x.get("delta") or {}).get("tool_calls") or []:
                f = t.get("function") or {}
                if "id" in t:
                    ids[t.get("index")] = t["id"]
                    got[t.get("index")] = {"name": f.get("name"), "arguments": ""}
                elif t.get("index") in got:
                    got[t["index"]]["arguments"] += f.get("arguments") or ""
    check(sorted(got) == list(range(len(whole))) and [got[i] for i in sorted(got)] == whole
          and len(set(ids.values())) == len(ids),
          "several calls streamed: indices 0, 1, ..., each id its own, the non-streamed calls",
          f"{short(got)} vs {short(whole)}")
    ch = ok_json(s, cc, dict(sev, parallel_tool_calls=False), "several calls, parallel_tool_calls false")["choices"][0]
    oc = (ch.get("message") or {}).get("tool_calls")
    check(isinstance(oc, list) and len(oc) == 1 and ch.get("finish_reason") == "tool_calls",
          "required, the end banned, parallel_tool_calls false: one call", short(ch))
    got = {}
    for c in Stream(s, cc, dict(sev, parallel_tool_calls=False, stream=True)).chunks():
        for x in c.get("choices") or []:
            for t in (x.get("delta") or {}).get("tool_calls") or []:
                got.setdefault(t.get("index"), "")
    check(list(got) == [0], "parallel_tool_calls false, streamed: one call", short(got))

    # the call goes back with its result: the template renders the turn
    if answers:
        m = answers[0]
        call = m["tool_calls"][0]
        msgs = TOOL_MESSAGES + [m, {"role": "tool", "tool_call_id": call["id"], "content": "{\"temp\": 21}"}]
        r = post(s, cc, {"messages": msgs, "tools": TOOLS, "max_tokens": 8, "temperature": 0})
        check(r.status == 200, "a conversation with the call and its result: 200", str(r))

    # auto: whatever the weights write is read, or given as content
    for seed in (1,):
        j = ok_json(s, cc, dict(body, tool_choice="auto", max_tokens=24, seed=seed), "tool_choice auto")
        ch = j["choices"][0]
        m = ch.get("message") or {}
        check((ch.get("finish_reason") in ("stop", "length") and isinstance(m.get("content"), str)
               and "tool_calls" not in m) or (ch.get("finish_reason") == "tool_calls" and m.get("tool_calls")),
              f"auto seed {seed}: content, or calls with finish_reason tool_calls", short(ch))

    for desc, extra, param in (
            ("a tool_choice naming no tool", {"tool_choice": {"type": "function", "function": {"name": "nope"}}},
             "tool_choice"),
            ("tool_choice required without tools", {"tools": None, "tool_choice": "required"}, "tool_choice"),
            ("a tool of another type", {"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools[0].type"),
            ("a tool without a name", {"tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
            ("parameters that are not an object",
             {"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]},
             "tools[0].function.parameters"),
            ("tool_choice required with response_format",
             {"tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
            ("the legacy functions", {"functions": [{"name": "f"}]}, "functions")):
        b = {k: v for k, v in dict(body, **extra).items() if v is not None}
        expect_error(post(s, cc, b), f"{desc}: 400 param {param}", 400, param=param)


@section("tools-hermes")
def tools_hermes():
    tool_calls_section("tools-hermes", "hermes")


@section("tools-llama3")
def tools_llama3():
    tool_calls_section("tools-llama3", "llama3")


@section("tools-mistral")
def tools_mistral():
    tool_calls_section("tools-mistral", "mistral")


@section("tools-kimi")
def tools_kimi():
    tool_calls_section("tools-kimi", "kimi")


@section("main")
def tools_without_template_support():
    # chatml writes no tools into the prompt: a request with tools is
    # refused rather than answered by a model that never saw them
    s = srv("main")
    for extra in ({}, {"tool_choice": "required"}, {"stream": True}):
        r = post(s, "/v1/chat/completions", chat_body(max_tokens=2, tools=TOOLS, **extra))
        expect_error(r, f"tools with a template that does not render them {extra}: 400 param tools",
                     400, param="tools")
    r = post(s, "/v1/chat/completions", chat_body(max_tokens=2, tools=[]))
    check(r.status == 200, "an empty tools list is still served", str(r))


# ---------------------------------------------------------- reasoning models

# Templates in the shapes of the reasoning families, for stories260K:
# random text is made exact by a grammar that spells the reply.
THINK_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor -%}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if reasoning_effort is defined %}Effort: {{ reasoning_effort }}\n{% endif %}"
    "{% if opened is defined %}<think>\n{% endif %}{% endif %}"
    "{#- replies think in <think> ... </think> first #}")
HARMONY_TEMPLATE = (
    "{%- if tools %}<|start|>developer<|message|>{{ tools | tojson }}<|end|>{% endif -%}"
    "{%- for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor -%}"
    "{%- if add_generation_prompt %}<|start|>assistant{% endif %}"
    "{#- <|channel|>analysis, commentary or final #}")


def template_file(text):
    fd, path = tempfile.mkstemp(prefix="hearth-template.", suffix=".jinja")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    made_files.append(path)
    return path


SERVERS["think"] = lambda: ["--chat-template", template_file(THINK_TEMPLATE), "-m", MODEL, "-c", "512", "-np", "2"]
SERVERS["think-opened"] = lambda: ["--chat-template", template_file(THINK_TEMPLATE.replace(
    "opened is defined", "true")), "-m", MODEL, "-c", "512", "-np", "2", "--reasoning-budget", "5"]
SERVERS["think-none"] = lambda: ["--chat-template", template_file(THINK_TEMPLATE), "-m", MODEL, "-c", "512",
                                 "-np", "2", "--reasoning-format", "none"]
SERVERS["harmony"] = lambda: ["--chat-template", template_file(HARMONY_TEMPLATE), "-m", MODEL, "-c", "1024",
                              "-np", "2"]
# the generation prompt opens an analysis message
SERVERS["harmony-opened"] = lambda: ["--chat-template", template_file(HARMONY_TEMPLATE.replace(
    "<|start|>assistant{% endif %}", "<|start|>assistant<|channel|>analysis<|message|>{% endif %}")), "-m", MODEL,
    "-c", "1024", "-np", "2", "--reasoning-budget", "4"]


def spelled(text):
    """A grammar whose only sentence is text."""
    return "root ::= " + json.dumps(text)


def streamed_parts(s, body, desc):
    """The reasoning_content and content of a streamed reply, and its usage."""
    st = Stream(s, "/v1/chat/completions", dict(body, stream=True, stream_options={"include_usage": True}))
    check(not st.framing(), f"{desc}: streamed", short(st.framing()))
    reasoning, answer, usage = "", "", None
    for c in st.chunks():
        for ch in c.get("choices") or []:
            d = ch.get("delta") or {}
            reasoning += d.get("reasoning_content") or ""
            answer += d.get("content") or ""
        usage = c.get("usage") or usage
    return reasoning, answer, usage


def reasoning_checks(name, reply, want_reasoning, want_answer):
    s = srv(name)
    cc = "/v1/chat/completions"
    check(any("reasoning: think" in l for l in s.lines), f"{name}: the ready line names the think format", s.log(3))
    body = chat_body(max_tokens=60, grammar=spelled(reply))
    j = ok_json(s, cc, body, f"{name} reply")
    check(not response_problems(j, "chat"), f"{name}: the response's shape", short(response_problems(j, "chat")))
    m = j["choices"][0]["message"]
    check(m.get("reasoning_content") == want_reasoning and m.get("content") == want_answer,
          f"{name}: reasoning_content and content apart", short(m))
    u = j.get("usage") or {}
    rt = (u.get("completion_tokens_details") or {}).get("reasoning_tokens")
    check(is_int(rt) and 0 < rt < u.get("completion_tokens", 0),
          f"{name}: usage counts the reasoning tokens among the completion tokens", short(u))
    r, a, su = streamed_parts(s, body, name)
    check(r == want_reasoning and a == want_answer, f"{name}: streamed, delta.reasoning_content and delta.content",
          short({"reasoning": r, "content": a}))
    check((((su or {}).get("completion_tokens_details") or {}).get("reasoning_tokens")) == rt,
          f"{name}: the stream's usage counts the same reasoning tokens", short(su))
    # stop strings cut the answer as before
    j = ok_json(s, cc, dict(body, stop=["swer"]), f"{name} stop")
    m = j["choices"][0]["message"]
    check(m.get("reasoning_content") == want_reasoning and m.get("content") == "An",
          f"{name}: a stop string in the answer", short(m))


@section("think")
def reasoning_think():
    reasoning_checks("think", "<think>Plan it.</think>\n\nAnswer.", "Plan it.", "Answer.")
    s = srv("think")
    cc = "/v1/chat/completions"
    # a reply without a block is all content
    j = ok_json(s, cc, chat_body(max_tokens=20, grammar=spelled("Answer.")), "think: no block")
    m = j["choices"][0]["message"]
    check(m.get("content") == "Answer." and "reasoning_content" not in m, "think: a reply without reasoning", short(m))
    # response_format where the model may open a block (it has no <think>
    # token to open one with): the answer from the first token
    j = ok_json(s, cc, chat_body(max_tokens=60, response_format=SMALL_RF, thinking_budget_tokens=2),
                "think: json_schema")
    m = j["choices"][0]["message"]
    check(small_valid(m.get("content")) and "reasoning_content" not in m and reasoning_tokens(j["usage"]) == 0,
          "think: json_schema without a block", short(m))
    # reasoning_effort reaches the template; other values are refused
    base = ok_json(s, cc, chat_body(max_tokens=1), "think: no effort")["usage"]["prompt_tokens"]
    low = ok_json(s, cc, chat_body(max_tokens=1, reasoning_effort="low"), "think: effort low")["usage"]["prompt_tokens"]
    check(low > base, "reasoning_effort is a template variable", f"{low} vs {base} prompt tokens")
    for bad_value in ("extreme", 3, ""):
        expect_error(post(s, cc, chat_body(reasoning_effort=bad_value)), f"reasoning_effort {bad_value!r}: 400",
                     400, param="reasoning_effort")


def reasoning_tokens(u):
    return ((u or {}).get("completion_tokens_details") or {}).get("reasoning_tokens")


# A small JSON Schema whose documents stories260K finishes in a few tokens.
SMALL_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}},
                "required": ["n"], "additionalProperties": False}
SMALL_RF = {"type": "json_schema", "json_schema": {"name": "small", "schema": SMALL_SCHEMA, "strict": True}}


def small_valid(text):
    try:
        v = json.loads(text)
    except (TypeError, ValueError):
        return False
    return isinstance(v, dict) and set(v) == {"n"} and isinstance(v["n"], int) and 1 <= v["n"] <= 9


def budget_checks(name, server_budget, answer):
    """A server whose template opened the reasoning: the grammar (or
    response_format) waits through it, the budget -- the server's, or a
    request's thinking_budget_tokens -- ends it after exactly that many
    tokens with the format's closing marker, and the answer follows."""
    s = srv(name)
    cc = "/v1/chat/completions"
    check(any(f"(budget {server_budget} tokens)" in l for l in s.lines),
          f"{name}: the ready line gives the reasoning budget", s.log(3))
    # the reasoning without a limit: the model's own text, to the token limit
    free = ok_json(s, cc, chat_body(max_tokens=12, thinking_budget_tokens=-1, grammar=spelled(answer)),
                   f"{name}: no budget")
    m, u = free["choices"][0]["message"], free["usage"]
    check(reasoning_tokens(u) == 12 and not m.get("content") and free["choices"][0]["finish_reason"] == "length",
          f"{name}: thinking_budget_tokens -1: all reasoning, the grammar never starts", short(free))
    free_reasoning = m.get("reasoning_content") or ""
    for budget in (None, 0, 3):
        want = server_budget if budget is None else budget
        body = chat_body(max_tokens=60, grammar=spelled(answer), thinking_budget_tokens=budget)
        j = ok_json(s, cc, body, f"{name}: budget {budget}")
        check(not response_problems(j, "chat"), f"{name}: budget {budget}: the response's shape",
              short(response_problems(j, "chat")))
        m, u = j["choices"][0]["message"], j["usage"]
        r = m.get("reasoning_content") or ""
        check(m.get("content") == answer and j["choices"][0]["finish_reason"] == "stop",
              f"{name}: budget {budget}: the answer is the grammar's", short(m))
        check(reasoning_tokens(u) == want, f"{name}: budget {budget}: exactly {want} reasoning tokens", short(u))
        check(free_reasoning.startswith(r) and (want == 0) == (r == ""),
              f"{name}: budget {budget}: the reasoning is the model's own text, cut short",
              short({"reasoning": r, "without a budget": free_reasoning}))
        sr, sa, su = streamed_parts(s, body, f"{name}: budget {budget}")
        check(sr == r and sa == answer and reasoning_tokens(su) == want,
              f"{name}: budget {budget}: streamed, the same parts and count", short({"r": sr, "a": sa, "u": su}))
    # response_format: a document of the schema after the reasoning
    j = ok_json(s, cc, chat_body(max_tokens=60, response_format=SMALL_RF), f"{name}: json_schema")
    m = j["choices"][0]["message"]
    check(small_valid(m.get("content")) and m.get("reasoning_content") and
          reasoning_tokens(j["usage"]) == server_budget,
          f"{name}: json_schema: free reasoning, then a valid document", short(m))
    # stop strings cut the answer as before
    j = ok_json(s, cc, chat_body(max_tokens=60, grammar=spelled(answer), stop=[answer[2:5]]), f"{name} stop")
    check(j["choices"][0]["message"].get("content") == answer[:2], f"{name}: a stop string in the answer",
          short(j["choices"][0]["message"]))
    for bad_value in (-2, "3", 1.5, 2 ** 40):
        expect_error(post(s, cc, chat_body(thinking_budget_tokens=bad_value)),
                     f"{name}: thinking_budget_tokens {bad_value!r}: 400", 400, param="thinking_budget_tokens")


@section("think-opened")
def reasoning_think_opened():
    # the template opened the block: the reply starts inside it
    budget_checks("think-opened", 5, "Answer.")


@section("think-none")
def reasoning_none():
    s = srv("think-none")
    reply = "<think>Plan it.</think>\n\nAnswer."
    j = ok_json(s, "/v1/chat/completions", chat_body(max_tokens=60, grammar=spelled(reply)), "none")
    m = j["choices"][0]["message"]
    check(m.get("content") == reply and "reasoning_content" not in m,
          "--reasoning-format none: everything is content", short(m))


@section("harmony")
def reasoning_harmony():
    s = srv("harmony")
    cc = "/v1/chat/completions"
    check(any("tool calls: harmony, reasoning: harmony" in l for l in s.lines),
          "harmony: the ready line names the formats", s.log(3))
    reply = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Done."
    body = chat_body(max_tokens=120, grammar=spelled(reply))
    m = ok_json(s, cc, body, "harmony reply")["choices"][0]["message"]
    check(m.get("reasoning_content") == "Think." and m.get("content") == "Done.",
          "harmony: analysis is reasoning_content, final is content", short(m))
    r, a, _ = streamed_parts(s, body, "harmony")
    check(r == "Think." and a == "Done.", "harmony: streamed", short({"reasoning": r, "content": a}))
    # a commentary message to functions.NAME is a tool call
    named = {"type": "function", "function": {"name": "get_weather"}}
    tb = {"messages": TOOL_MESSAGES, "tools": TOOLS, "max_tokens": 200, "temperature": 1, "seed": 4,
          "tool_choice": named}
    ch = ok_json(s, cc, tb, "harmony tool call")["choices"][0]
    calls = (ch.get("message") or {}).get("tool_calls")
    good = isinstance(calls, list) and len(calls) == 1
    check(good and ch.get("finish_reason") == "tool_calls", "harmony: one tool call", short(ch))
    if good:
        fn = calls[0].get("function") or {}
        check(fn.get("name") == "get_weather" and tool_args_valid("get_weather", fn.get("arguments")),
              "harmony: the call's name and arguments", short(calls[0]))
        check(tool_id_ok("harmony", calls[0].get("id")), "harmony: the call's id", short(calls[0]))
    st = Stream(s, cc, dict(tb, stream=True))
    deltas = [d for c in st.chunks() for ch in c.get("choices") or [] for d in ((ch.get("delta") or {}).get("tool_calls") or [])]
    names = [(d.get("function") or {}).get("name") for d in deltas if (d.get("function") or {}).get("name")]
    args = "".join((d.get("function") or {}).get("arguments") or "" for d in deltas)
    check(names == ["get_weather"] and tool_args_valid("get_weather", args), "harmony: the call streamed",
          short(deltas))
    # tool_choice "required": a call of one of the tools, with its arguments
    ch = ok_json(s, cc, dict(tb, tool_choice="required"), "harmony required")["choices"][0]
    calls = (ch.get("message") or {}).get("tool_calls")
    good = isinstance(calls, list) and len(calls) >= 1 and ch.get("finish_reason") == "tool_calls"
    fn = (calls[0].get("function") or {}) if good else {}
    check(good and fn.get("name") in [t["function"]["name"] for t in TOOLS] and
          tool_args_valid(fn.get("name"), fn.get("arguments")),
          "harmony: tool_choice required calls one of several tools", short(ch))
    # where a header may come, text without one is the answer: the
    # schema's from the first token (the vocabulary has no control tokens
    # to open a header with)
    j = ok_json(s, cc, chat_body(max_tokens=60, response_format=SMALL_RF), "harmony json_schema")
    m = j["choices"][0]["message"]
    check(small_valid(m.get("content")) and not m.get("reasoning_content") and reasoning_tokens(j["usage"]) == 0,
          "harmony: json_schema without a header: the answer from the first token", short(m))


@section("harmony-opened")
def reasoning_harmony_opened():
    # the template opened an analysis message; the budget writes its end
    # and a final message's header
    budget_checks("harmony-opened", 4, "Done.")


def reference_continuation():
    with open(REFERENCE, encoding="utf-8") as f:
        lines = f.read().split("\n")
    k = next(i for i, l in enumerate(lines) if l.startswith("--- output"))
    story = "\n".join(lines[k + 1:])
    if story.startswith("<s> "):
        story = story[4:]
    assert story.startswith("Once upon a time")
    return story[len("Once upon a time"):]


@section("main")
def completions():
    s = srv("main")
    ref = reference_continuation()
    body = {"model": "x", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}
    r = post(s, "/v1/completions", body)
    need(r.status == 200 and isinstance(r.json, dict), f"greedy completion: {r}")
    j = r.json
    p = response_problems(j, "text")
    check(not p, "completion response shape", "; ".join(p) + f" in {short(j)}")
    need(not p, "the completion response has the wrong shape")
    t = text(j)
    check(len(t) > 20 and ref.startswith(t), "the greedy text is the reference story's",
          f"got {t!r}, the reference goes on {ref[:len(t) + 10]!r}")
    check(j["usage"]["prompt_tokens"] == 5 and j["usage"]["completion_tokens"] == 24
          and j["choices"][0]["finish_reason"] == "length",
          "prompt 5 tokens (BOS added), 24 generated, finish_reason length", short(j["usage"]))

    j2 = ok_json(s, "/v1/completions", dict(body, echo=True), "echo")
    check(text(j2) == "Once upon a time" + t, "echo: the text starts with the prompt", repr(text(j2)))

    j3 = ok_json(s, "/v1/completions", dict(body, prompt=[1, 403, 407, 261, 378]), "token prompt")
    check(text(j3) == t and j3["usage"]["prompt_tokens"] == 5, "a prompt of token ids gives the same text",
          f"{text(j3)!r}, usage {short(j3['usage'])}")

    j4 = ok_json(s, "/v1/completions", dict(body, prompt=["Once upon a time", "One day"]), "two prompts")
    p = response_problems(j4, "text", n=2)
    check(not p and text(j4, 0) == t, "two string prompts: choices 0 and 1, the first the same text",
          "; ".join(p) + f" {short(j4)}")
    j5 = ok_json(s, "/v1/completions", dict(body, prompt=[[1, 403, 407, 261, 378], [1, 403]]), "two token prompts")
    p = response_problems(j5, "text", n=2)
    check(not p and text(j5, 0) == t, "two token-id prompts: choices 0 and 1", "; ".join(p) + f" {short(j5)}")

    j6 = ok_json(s, "/v1/completions", dict(body, stop="little girl", max_tokens=24), "stop")
    check(text(j6) == ", there was a " and j6["choices"][0]["finish_reason"] == "stop",
          "stop 'little girl': the text before it, finish_reason stop", short(j6["choices"]))

    j7 = ok_json(s, "/v1/completions", {"prompt": "Once", "max_tokens": 6, "temperature": 0,
                                        "logit_bias": {"378": 100}}, "logit_bias +100")
    d = ok_json(s, "/detokenize", {"tokens": [378] * 6}, "detokenize")
    check(text(j7).strip() == d.get("content", "").strip() and j7["usage"]["completion_tokens"] == 6,
          "logit_bias +100 on ' time': six times ' time'", f"{text(j7)!r} vs {d.get('content')!r}")


def speculation_checks(name):
    s = srv(name)
    ref = reference_continuation()
    body = {"model": "x", "prompt": "Once upon a time", "max_tokens": 48, "temperature": 0,
            "logit_bias": NO_EOS}
    j = ok_json(s, "/v1/completions", body, f"{name}: greedy completion")
    t = text(j)
    check(len(t) > 40 and ref.startswith(t), f"{name}: speculation gives the reference story's greedy text",
          f"got {t!r}, the reference goes on {ref[:len(t) + 10]!r}")
    u = j.get("usage", {}).get("hearth_speculation")
    good = (isinstance(u, dict) and all(is_int(u.get(k)) for k in ("drafted_tokens", "accepted_tokens", "model_steps"))
            and is_num(u.get("acceptance_rate")) and is_num(u.get("tokens_per_step")))
    check(good and u["accepted_tokens"] <= u["drafted_tokens"] and 0 < u["model_steps"] <= 48
          and abs(u["tokens_per_step"] * u["model_steps"] - 48) < 1e-6,
          f"{name}: usage.hearth_speculation: drafted, accepted, rate, steps, tokens per step", short(u))
    # sampled requests side by side, streamed and not
    bodies = [{"messages": [{"role": "user", "content": f"Tell me story number {i}."}], "max_tokens": 40,
               "temperature": 0, "stream": True, "logit_bias": NO_EOS} for i in range(4)]
    alone_then_together(s, bodies, f"{name}: speculative requests at once")
    r = ok_json(s, "/v1/chat/completions", chat_body(temperature=0.9, seed=5, max_tokens=30), f"{name}: sampled")
    check(len(content(r)) > 0, f"{name}: a sampled request speculates too", short(r))
    m = metrics(s)
    p = metrics_problems(m)
    check(not p, f"{name}: /metrics parses", "; ".join(p[:8]))
    d, a = m.get("hearth_drafted_tokens_total") or 0, m.get("hearth_accepted_tokens_total")
    check(d > 0 and a is not None and (0 < a or name == "lookup") and a <= d and (m.get("hearth_verify_steps_total") or 0) > 0,
          f"{name}: /metrics counts drafted {d} and accepted {a} tokens and verifications",
          str({k: m.get(k) for k in ("hearth_drafted_tokens_total", "hearth_accepted_tokens_total",
                                      "hearth_verify_steps_total", "hearth_draft_steps_total")}))
    if name == "draft":
        check((m.get("hearth_draft_steps_total") or 0) > 0, "draft: the draft model ran",
              str(m.get("hearth_draft_steps_total")))
    check(m.get("hearth_kv_blocks_used") == 0, f"{name}: every block free again", str(m.get("hearth_kv_blocks_used")))


@section("draft")
def speculation_draft():
    speculation_checks("draft")


@section("lookup")
def speculation_lookup():
    speculation_checks("lookup")


@section("main")
def streaming():
    s = srv("main")
    body = chat_body(temperature=1, seed=1234, max_tokens=16,
                     stream=True, stream_options={"include_usage": True})
    st = Stream(s, "/v1/chat/completions", body)
    p = st.framing()
    check(not p, "chat stream: HTTP/1.1 200, text/event-stream, chunked, every event 'data: ...\\n\\n', "
          "[DONE] last", "; ".join(p))
    need(st.status == 200, f"chat stream: status {st.status}")
    texts, fin, usage, p = chat_stream(st.chunks(), include_usage=True)
    check(not p, "chat stream chunks: role first, content deltas, finish chunk, usage chunk with choices []",
          "; ".join(p[:6]))
    plain = dict(body, stream=False)
    del plain["stream_options"]
    j = ok_json(s, "/v1/chat/completions", plain, "the same request without streaming")
    check(texts[0] == content(j), "the streamed deltas make the non-stream text (same seed)",
          f"stream {texts[0]!r}, non-stream {content(j)!r}")
    check(fin[0] == j["choices"][0]["finish_reason"], "the same finish_reason streamed", f"{fin} vs {short(j)}")
    if isinstance(usage, dict):
        check(usage.get("prompt_tokens") == j["usage"]["prompt_tokens"]
              and usage.get("completion_tokens") == j["usage"]["completion_tokens"],
              "the usage chunk counts what the non-stream usage counts", f"{short(usage)} vs {short(j['usage'])}")

    st = Stream(s, "/v1/chat/completions", chat_body(temperature=1, seed=99, max_tokens=10, n=2, stream=True,
                                                      logit_bias=NO_EOS))
    p = st.framing()
    texts, fin, usage, p2 = chat_stream(st.chunks(), n=2) if st.status == 200 else ([None, None], [], None, [])
    check(not p and not p2, "n=2 stream: both choices framed and finished", "; ".join((p + p2)[:6]))
    j = ok_json(s, "/v1/chat/completions", chat_body(temperature=1, seed=99, max_tokens=10, n=2,
                                                     logit_bias=NO_EOS), "n=2")
    check(texts == [content(j, 0), content(j, 1)], "n=2 stream: each choice's deltas make its non-stream text",
          f"stream {texts}, non-stream {[c['message']['content'] for c in j['choices']]}")

    st = Stream(s, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0,
                                       "stream": True})
    p = st.framing()
    texts, fin, p2 = text_stream(st.chunks()) if st.status == 200 else ([None], [], [])
    check(not p and not p2, "completion stream: framing and text_completion chunks", "; ".join((p + p2)[:6]))
    j = ok_json(s, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0},
                "the same completion without streaming")
    check(texts[0] == text(j) and fin == [j["choices"][0]["finish_reason"]],
          "the completion stream's text and finish_reason are the non-stream ones",
          f"stream {texts[0]!r} {fin}, non-stream {text(j)!r}")


@section("main")
def stop():
    s = srv("main")
    j = ok_json(s, "/v1/chat/completions", chat_body(max_tokens=24, logit_bias=NO_EOS), "greedy, EOS banned")
    t = content(j)
    need(len(t) >= 12, f"the greedy reply {t!r} is too short to cut")
    mid = len(t) // 2
    while mid < len(t) - 4 and not t[mid:mid + 4].strip():
        mid += 1
    cut = t[mid:mid + 4]
    want = t[:t.find(cut)]
    for desc, stopv in [("a string", cut), ("an array", ["zqzqzq", cut])]:
        j2 = ok_json(s, "/v1/chat/completions", chat_body(max_tokens=24, logit_bias=NO_EOS, stop=stopv), "stop")
        c2 = content(j2)
        check(c2 == want and cut not in c2 and j2["choices"][0]["finish_reason"] == "stop",
              f"stop {cut!r} as {desc}: the text before it, finish_reason stop",
              f"got {c2!r} ({j2['choices'][0]['finish_reason']}), expected {want!r}")
    st = Stream(s, "/v1/chat/completions", chat_body(max_tokens=24, logit_bias=NO_EOS, stop=cut, stream=True))
    p = st.framing()
    chunks = st.chunks() if st.status == 200 else []
    texts, fin, _, p2 = chat_stream(chunks)
    pieces = [c["choices"][0]["delta"].get("content", "") for c in chunks if c.get("choices")]
    check(not p and not p2 and texts[0] == want and fin == ["stop"] and not any(cut in x for x in pieces),
          f"stop {cut!r} streamed: no chunk holds it, the deltas make the text before it",
          "; ".join(p + p2) + f" got {texts} {fin}, expected {want!r}")
    j3 = ok_json(s, "/v1/chat/completions", chat_body(max_tokens=24, logit_bias=NO_EOS, stop="zqzqzq"), "stop")
    check(content(j3) == t and j3["choices"][0]["finish_reason"] == "length",
          "a stop string never generated: the whole text, finish_reason length", short(j3["choices"]))


@section("main")
def seed():
    s = srv("main")
    b = chat_body(temperature=1, seed=42, max_tokens=16, logit_bias=NO_EOS)
    a = ok_json(s, "/v1/chat/completions", b, "seed 42")
    a2 = ok_json(s, "/v1/chat/completions", b, "seed 42 again")
    check(content(a) == content(a2), "temperature 1, the same seed: the same text", f"{content(a)!r} vs {content(a2)!r}")
    check(a["hearth"]["seed"] == 42 and "seed=42" in a["hearth"]["sampling"], "hearth.seed 42 reported",
          short(a["hearth"]))
    check("temp=1" in a["hearth"]["sampling"], "hearth.sampling says temp=1", short(a["hearth"]))
    b43 = ok_json(s, "/v1/chat/completions", dict(b, seed=43), "seed 43")

    free = dict(b)
    del free["seed"]
    f = ok_json(s, "/v1/chat/completions", free, "no seed")
    sd = f["hearth"]["seed"]
    f2 = ok_json(s, "/v1/chat/completions", dict(b, seed=sd), "the reported seed")
    check(content(f) == content(f2), "the seed a seedless request reports reproduces its text",
          f"seed {sd}: {content(f)!r} vs {content(f2)!r}")

    n2 = ok_json(s, "/v1/chat/completions", dict(b, n=2), "n=2")
    p = response_problems(n2, "chat", n=2)
    check(not p, "n=2: two choices, index 0 and 1", "; ".join(p))
    if not p:
        check(content(n2, 0) == content(a) and content(n2, 1) == content(b43),
              "n=2 with seed 42: choice 0 is seed 42's text, choice 1 seed 43's",
              f"{[content(n2, 0), content(n2, 1)]} vs {[content(a), content(b43)]}")
        check(n2["usage"]["completion_tokens"] == 32, "n=2: completion_tokens counts both choices",
              short(n2["usage"]))


@section("main")
def fresh_seeds():
    # Whether a seed was given is the request's own: requests without one
    # draw fresh randomness each, and the seed each reports is the one it
    # used.
    s = srv("main")
    b = {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 1.5, "logit_bias": NO_EOS}
    got = [ok_json(s, "/v1/completions", b, f"request {i} without a seed") for i in range(4)]
    seeds = [g["hearth"]["seed"] for g in got]
    texts = [text(g) for g in got]
    check(len(set(seeds)) == 4, "four requests without a seed report four different seeds", f"{seeds}")
    check(len(set(texts)) > 1, "four requests without a seed at temperature 1.5 do not all give one text",
          f"{texts}")
    tuples = [re.search(r"\bseed=(\d+)\b", g["hearth"]["sampling"]) for g in got]
    check(all(m and int(m.group(1)) == sd for m, sd in zip(tuples, seeds)),
          "hearth.sampling names the seed hearth.seed reports", f"{[g['hearth'] for g in got]}")
    again = [ok_json(s, "/v1/completions", dict(b, seed=sd), f"seed {sd}") for sd in seeds[:2]]
    check([text(a) for a in again] == texts[:2], "the seeds reported give the texts again",
          f"{[text(a) for a in again]} vs {texts[:2]}")


@section("main")
def logprobs():
    s = srv("main")
    j = ok_json(s, "/v1/chat/completions", chat_body(max_tokens=8, logit_bias=NO_EOS, logprobs=True, top_logprobs=3),
                "chat logprobs")
    lp = j["choices"][0].get("logprobs")
    c = lp.get("content") if isinstance(lp, dict) else None
    need(isinstance(c, list), f"chat logprobs: logprobs is {short(lp)}")
    p = []
    if len(c) != 8:
        p.append(f"{len(c)} entries for 8 tokens")
    for e in c:
        if not (isinstance(e, dict) and isinstance(e.get("token"), str) and is_num(e.get("logprob"))
                and e["logprob"] <= 1e-6 and isinstance(e.get("bytes"), list)
                and all(is_int(b) and 0 <= b < 256 for b in e["bytes"])):
            p.append(f"entry {short(e, 200)}")
            continue
        top = e.get("top_logprobs")
        if not (isinstance(top, list) and len(top) == 3 and all(
                isinstance(x, dict) and isinstance(x.get("token"), str) and is_num(x.get("logprob"))
                and isinstance(x.get("bytes"), list) for x in top)):
            p.append(f"top_logprobs {short(top, 200)}")
            continue
        if any(a["logprob"] < b["logprob"] for a, b in zip(top, top[1:])):
            p.append(f"top_logprobs not sorted: {short(top, 200)}")
        if abs(top[0]["logprob"] - e["logprob"]) > 1e-4:
            p.append(f"greedy token {e['token']!r} ({e['logprob']}) is not the most likely {short(top[0], 100)}")
    check(not p, "chat logprobs: 8 entries of token, logprob, bytes and 3 top_logprobs", "; ".join(p[:5]))
    if not p:
        joined = b"".join(bytes(e["bytes"]) for e in c).decode("utf-8", "replace")
        check(joined == content(j) or joined.lstrip(" ") == content(j).lstrip(" "),
              "the tokens' bytes make the text", f"{joined!r} vs {content(j)!r}")
    j = ok_json(s, "/v1/chat/completions", chat_body(max_tokens=4, logprobs=True), "logprobs without top_logprobs")
    lp = j["choices"][0].get("logprobs")
    check(isinstance(lp, dict) and isinstance(lp.get("content"), list) and lp["content"]
          and all(e.get("top_logprobs") == [] for e in lp["content"]),
          "logprobs true without top_logprobs: entries with top_logprobs []", short(lp))

    st = Stream(s, "/v1/chat/completions", chat_body(max_tokens=8, logit_bias=NO_EOS, logprobs=True,
                                                     top_logprobs=2, stream=True))
    n = 0
    for ch in st.chunks() if st.status == 200 else []:
        for x in ch.get("choices") or []:
            if isinstance(x.get("logprobs"), dict):
                n += len(x["logprobs"].get("content") or [])
    check(n == 8, "a chat stream with logprobs carries one entry per token", f"{n} entries for 8 tokens")

    j = ok_json(s, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0,
                                       "logprobs": 2}, "completion logprobs")
    lp = j["choices"][0].get("logprobs")
    good = (isinstance(lp, dict) and all(isinstance(lp.get(k), list) and len(lp[k]) == 8
                                         for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset")))
    check(good and all(isinstance(d, dict) and 1 <= len(d) <= 2 for d in lp["top_logprobs"])
          and all(is_num(x) and x <= 1e-6 for x in lp["token_logprobs"]),
          "completion logprobs 2: tokens, token_logprobs, top_logprobs of 2, text_offset for 8 tokens", short(lp))
    if good:
        check("".join(lp["tokens"]) == text(j), "the completion's logprob tokens make its text",
              f"{lp['tokens']} vs {text(j)!r}")


@section("main")
def prefix_cache():
    s = srv("main")
    m0 = metrics(s)
    system = ("You are a kind old storyteller who lives in a small house by the sea and tells the children "
              "of the village stories about the animals of the forest.")
    b = chat_body(messages=[{"role": "system", "content": system}, {"role": "user", "content": "Tell me one."}],
                  max_tokens=8)
    a = ok_json(s, "/v1/chat/completions", b, "first")
    a2 = ok_json(s, "/v1/chat/completions", b, "again")
    k = a2["usage"]["prompt_tokens_details"]["cached_tokens"]
    check(0 < k < a2["usage"]["prompt_tokens"], "the same prompt again: cached_tokens > 0",
          f"{short(a['usage'])} then {short(a2['usage'])}")
    check(content(a) == content(a2), "the reply from the prefix cache is the same", f"{content(a)!r} vs {content(a2)!r}")
    m1 = metrics(s)
    check(m1.get("hearth_prefix_cache_hits_total", 0) > m0.get("hearth_prefix_cache_hits_total", 0)
          and m1.get("hearth_prompt_tokens_cached_total", 0) >= m0.get("hearth_prompt_tokens_cached_total", 0) + k,
          "hearth_prefix_cache_hits_total and hearth_prompt_tokens_cached_total rose",
          f"hits {m0.get('hearth_prefix_cache_hits_total')} -> {m1.get('hearth_prefix_cache_hits_total')}, "
          f"cached {m0.get('hearth_prompt_tokens_cached_total')} -> {m1.get('hearth_prompt_tokens_cached_total')}")


@section("main")
def errors():
    s = srv("main")
    cc = "/v1/chat/completions"
    for desc, raw in [("malformed JSON", b'{"messages": [{"role": "user", "content": "Hi"'),
                      ("a body that is not an object", b'[1, 2]'),
                      ("an empty body", b'')]:
        expect_error(lambda: post(s, cc, None, raw=raw), f"{desc}: 400", 400, etype="invalid_request_error")
    cases = [
        ("temperature 'hot'", {"temperature": "hot"}, "temperature"),
        ("temperature 2.5", {"temperature": 2.5}, "temperature"),
        ("temperature -0.5", {"temperature": -0.5}, "temperature"),
        ("top_p 1.5", {"top_p": 1.5}, "top_p"),
        ("n 0", {"n": 0}, "n"),
        ("n 17", {"n": 17}, "n"),
        ("n 1.5", {"n": 1.5}, "n"),
        ("max_tokens 0", {"max_tokens": 0}, "max_tokens"),
        ("max_tokens '5'", {"max_tokens": "5"}, "max_tokens"),
        ("max_tokens beyond the cap", {"max_tokens": 100000}, "max_tokens"),
        ("max_completion_tokens 0", {"max_tokens": None, "max_completion_tokens": 0}, "max_completion_tokens"),
        ("presence_penalty 3", {"presence_penalty": 3}, "presence_penalty"),
        ("frequency_penalty -2.5", {"frequency_penalty": -2.5}, "frequency_penalty"),
        ("seed 'x'", {"seed": "x"}, "seed"),
        ("stream 'yes'", {"stream": "yes"}, "stream"),
        ("stream_options without stream", {"stream_options": {"include_usage": True}}, "stream_options"),
        ("logprobs 'yes'", {"logprobs": "yes"}, "logprobs"),
        ("top_logprobs 21", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("top_logprobs without logprobs", {"top_logprobs": 2}, "top_logprobs"),
        ("stop 5", {"stop": 5}, "stop"),
        ("stop of 17 strings", {"stop": [f"s{i}" for i in range(17)]}, "stop"),
        ("stop ['']", {"stop": [""]}, "stop"),
        ("top_k -1", {"top_k": -1}, "top_k"),
        ("min_p 2", {"min_p": 2}, "min_p"),
        ("repeat_penalty 0", {"repeat_penalty": 0}, "repeat_penalty"),
        ("repeat_penalty 101", {"repeat_penalty": 101}, "repeat_penalty"),
        ("user 5", {"user": 5}, "user"),
        ("response_format 'xml'", {"response_format": {"type": "xml"}}, "response_format"),
        ("response_format json_schema without json_schema", {"response_format": {"type": "json_schema"}},
         "response_format"),
        ("response_format json_schema with an unsupported keyword",
         {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "multipleOf": 3}}}},
         "response_format"),
        ("response_format json_schema with a schema that is not an object",
         {"response_format": {"type": "json_schema", "json_schema": {"schema": [1]}}}, "response_format"),
        ("grammar 5", {"grammar": 5}, "grammar"),
        ("grammar that does not parse", {"grammar": "root ::= \"a"}, "grammar"),
        ("grammar with an undefined rule", {"grammar": "root ::= x"}, "grammar"),
        ("grammar and response_format json_object",
         {"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}, "grammar"),
        ("tools with a function that is not an object", {"tools": [{"type": "function", "function": "f"}]},
         "tools[0].function"),
        ("tool_choice required", {"tool_choice": "required"}, "tool_choice"),
        ("messages missing", {"messages": None}, "messages"),
        ("messages []", {"messages": []}, "messages"),
        ("messages 'hi'", {"messages": "hi"}, "messages"),
        ("messages[0].content 5", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ("messages[1].content a part that is not text",
         {"messages": [{"role": "system", "content": "x"},
                       {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
         "messages[1].content*"),
        ("messages[0].role missing", {"messages": [{"content": "Hi"}]}, "messages[0].role"),
        ("messages[0].role 'wizard'", {"messages": [{"role": "wizard", "content": "Hi"}]}, "messages[0].role"),
    ]
    for desc, extra, param in cases:
        b = chat_body(max_tokens=4)
        for k, v in extra.items():
            if v is None:
                b.pop(k, None)
            else:
                b[k] = v
        expect_error(lambda: post(s, cc, b), f"chat {desc}: 400 param {param.rstrip('*')}", 400, param=param,
                     etype="invalid_request_error")
    for desc, v in [("logit_bias 200", {"5": 200}), ("logit_bias with a key that is not an id", {"abc": 1}),
                    ("logit_bias []", [])]:
        try:
            r = post(s, cc, chat_body(max_tokens=4, logit_bias=v))
        except (OSError, http.client.HTTPException) as e:
            fail(f"chat {desc}: no answer: {type(e).__name__}: {e}")
            continue
        e = r.json.get("error") if isinstance(r.json, dict) else None
        check(r.status == 400 and isinstance(e, dict) and str(e.get("param")).startswith("logit_bias"),
              f"chat {desc}: 400 param logit_bias", str(r))
    tc = [("prompt missing", {"prompt": None}, "prompt"),
          ("prompt 5", {"prompt": 5}, "prompt"),
          ("prompt [[1, 'a']]", {"prompt": [[1, "a"]]}, "prompt*"),
          ("prompt id beyond the vocabulary", {"prompt": [1, 99999]}, "prompt*"),
          ("logprobs 6", {"logprobs": 6}, "logprobs"),
          ("echo 'x'", {"echo": "x"}, "echo"),
          ("max_tokens -1", {"max_tokens": -1}, "max_tokens")]
    for desc, extra, param in tc:
        b = {"prompt": "Once", "max_tokens": 4}
        for k, v in extra.items():
            if v is None:
                b.pop(k, None)
            else:
                b[k] = v
        expect_error(lambda: post(s, "/v1/completions", b), f"completions {desc}: 400 param {param.rstrip('*')}", 400,
                     param=param,
                     etype="invalid_request_error")

    for method, path in [("GET", "/nope"), ("POST", "/v1/nope"), ("GET", "/v1"), ("GET", "/v1/models/x/y")]:
        expect_error(lambda: request(s, method, path, body={} if method == "POST" else None), f"{method} {path}: 404",
                     404, code="not_found")
    for method, path in [("GET", cc), ("GET", "/v1/completions"), ("POST", "/health"), ("POST", "/v1/models"),
                         ("POST", "/metrics"), ("GET", "/tokenize"), ("DELETE", "/v1/models"), ("PUT", cc)]:
        expect_error(lambda: request(s, method, path, body={} if method in ("POST", "PUT") else None),
                     f"{method} {path}: 405", 405, code="method_not_allowed")
    r = request(s, "GET", "/health")
    check(r.status == 200, "the server answers after the errors", str(r))


@section("main")
def limits():
    s = srv("main")
    long_text = "The cat sat on the mat and looked at the big red ball. " * 40
    r = post(s, "/v1/chat/completions", chat_body(messages=[{"role": "user", "content": long_text}]))
    p = error_problems(r, 400, code="context_length_exceeded", etype="invalid_request_error")
    msg = str(((r.json or {}).get("error") or {}).get("message")) if isinstance(r.json, dict) else ""
    check(not p and "256" in msg, "chat prompt longer than the context (256): 400 context_length_exceeded "
          "naming 256", "; ".join(p) + f" message {msg!r}")
    r = post(s, "/v1/completions", {"prompt": [1] + [378] * 300, "max_tokens": 4})
    expect_error(r, "token prompt longer than the context: 400 context_length_exceeded", 400,
                 code="context_length_exceeded")

    # 413: a valid body over --max-body 16384, over a raw socket so that a
    # server that answers before reading it all is fine.
    big = json.dumps(chat_body(user="x" * 20000)).encode()
    raw = Raw(s, "/v1/chat/completions", raw=big)
    try:
        status = raw.read_head()
        data = raw.body()
        r = Resp(status, raw.headers, data)
        expect_error(r, "a body over --max-body: 413 request_too_large", 413, code="request_too_large")
    except (OSError, EOFError) as e:
        fail(f"a body over --max-body: no answer ({type(e).__name__}: {e})")
    finally:
        raw.close()
    small = chat_body(user="x" * 15000, max_tokens=2)
    r = post(s, "/v1/chat/completions", small)
    check(r.status == 200, "a body just under --max-body: 200", str(r))
    r = request(s, "GET", "/health")
    check(r.status == 200, "the server answers after the limits", str(r))


def stream_text(s, b):
    """A streamed chat request's text, or (None, what went wrong)."""
    try:
        st = Stream(s, "/v1/chat/completions", b)
    except (Abort, OSError, EOFError) as e:
        return None, f"{type(e).__name__}: {e}"
    p = st.framing()
    if p:
        return None, "; ".join(p)
    texts, fin, _, p = chat_stream(st.chunks())
    return (texts[0], None) if not p else (None, "; ".join(p[:3]))


def alone_then_together(s, bodies, what):
    """Sends each request alone, one after the other, then all at once;
    checks each gives the same text both ways.  Gives the most requests
    seen running at once."""
    alone = [stream_text(s, b) for b in bodies]
    bad = [f"request {i}: {e}" for i, (_, e) in enumerate(alone) if e]
    need(not bad, f"{what}: requests sent alone failed: " + "; ".join(bad[:3]))

    results = [None] * len(bodies)
    barrier = threading.Barrier(len(bodies))
    running = []
    stop_monitor = threading.Event()

    def worker(i):
        try:
            barrier.wait(timeout=IO_TIMEOUT)
            results[i] = stream_text(s, bodies[i])
        except Exception as e:
            results[i] = (None, f"{type(e).__name__}: {e}")

    def monitor():
        while not stop_monitor.is_set():
            try:
                running.append(metrics(s).get("hearth_requests_running", 0))
            except Exception:
                pass
            time.sleep(0.02)

    mon = threading.Thread(target=monitor, daemon=True)
    mon.start()
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    stop_monitor.set()
    mon.join(timeout=5)
    need(not any(t.is_alive() for t in threads), f"{what}: the concurrent requests did not finish in 60 s")
    bad = [f"request {i}: {e}" for i, (_, e) in enumerate(results) if e]
    check(not bad, f"{what}: {len(bodies)} concurrent streaming requests complete", "; ".join(bad[:3]))
    diff = [f"request {i}: alone {alone[i][0]!r}, at once {results[i][0]!r}"
            for i in range(len(bodies)) if not results[i][1] and results[i][0] != alone[i][0]]
    check(not diff, f"{what}: each text of {len(bodies)} concurrent requests is the text it gets alone",
          f"{len(diff)} differ: " + "; ".join(diff[:3]))
    return max(running) if running else 0


@section("main")
def batch():
    s = srv("main")
    animals = ["cat", "dog", "fox", "bird", "fish", "frog", "bear", "duck", "mouse", "horse", "lion", "owl",
               "pig", "cow", "bee", "sheep"]
    bodies = []
    for i, a in enumerate(animals):
        u = f"Tell me a story about a {a}." + (" Make it a happy one, please." if i % 3 == 0 else "")
        bodies.append({"messages": [{"role": "user", "content": u}], "max_tokens": 24 if i % 2 else 16,
                       "temperature": 0, "stream": True, "logit_bias": NO_EOS})
    top = alone_then_together(s, bodies, "greedy")
    check(top >= 2, "the 16 requests ran at once (hearth_requests_running reached 2 or more)",
          f"the most seen was {top}")
    # Sampled requests, each with its own seed, are independent of their
    # neighbours in the batch too.
    seeded = [dict(b, temperature=1, seed=100 + i, max_tokens=16) for i, b in enumerate(bodies[:8])]
    alone_then_together(s, seeded, "temperature 1, seeded")


@section("tight")
def preemption():
    # A pool of 5 blocks of 64 positions for 4 sequences of about 140
    # positions each (3 blocks): they cannot all grow at once.
    s = srv("tight")
    bodies = [{"messages": [{"role": "user", "content": f"Tell me story number {i}."}], "max_tokens": 100,
               "temperature": 0, "stream": True, "logit_bias": NO_EOS} for i in range(4)]
    alone_then_together(s, bodies, "a KV pool too small for all at once")
    m = metrics(s)
    ok(f"hearth_preemptions_total is {m.get('hearth_preemptions_total')}")
    check(m.get("hearth_requests_running") == 0 and m.get("hearth_kv_blocks_used") == 0,
          "the small pool is free again", f"running {m.get('hearth_requests_running')}, "
          f"used {m.get('hearth_kv_blocks_used')}")


@section("nan")
def nan_logits():
    # The library's message reaches the client as hearth run prints it.
    s = srv("nan")
    cmd = s.cmd[s.cmd.index("-m"):s.cmd.index("-m") + 2]
    cli = subprocess.run([HEARTH, "run"] + cmd + ["-t", THREADS, "-n", "4", "--temp", "0", "-p", "Once"],
                         capture_output=True, timeout=60)
    lines = [l for l in cli.stderr.decode("utf-8", "replace").splitlines() if l.startswith("hearth: run: ")]
    need(cli.returncode != 0 and lines, f"hearth run on NaN weights: status {cli.returncode}, stderr "
         f"{short(cli.stderr)}")
    said = lines[-1][len("hearth: run: "):]
    check("logit" in said, "hearth run names the bad logit", said)
    b = {"prompt": "Once", "max_tokens": 4, "temperature": 0}
    r = post(s, "/v1/completions", b)
    if expect_error(r, "NaN logits: 500 generation_failed", 500, "generation_failed"):
        check(r.json["error"]["message"] == said, "the error reads as hearth run's",
              f"{r.json['error']['message']!r} vs {said!r}")
    st = Stream(s, "/v1/completions", dict(b, stream=True))
    events = [e for e in st.chunks() if isinstance(e, dict) and "error" in e]
    check(len(events) == 1 and events[0]["error"].get("message") == said,
          "a stream's error event reads as hearth run's too", f"{events} vs {said!r}")


@section(None)
def kv_size_below_context():
    # A pool smaller than one context would cut a lone request short:
    # refused at start, a usage error.
    p = subprocess.run([HEARTH, "serve", "-m", MODEL, "-t", THREADS, "--host", "127.0.0.1", "--port", "0",
                        "-c", "512", "--kv-size", "128"], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=60)
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == 2 and "--kv-size 128" in err and "ready" not in err,
          "-c 512 --kv-size 128: exit status 2, naming --kv-size", f"status {p.returncode}: {short(err)}")


@section("main")
def metrics_after():
    s = srv("main")
    m = metrics(s)
    p = metrics_problems(m)
    check(not p, "/metrics after the requests: names, types, histograms", "; ".join(p[:8]))
    g = {n: m.get(n) for n in GAUGES}
    check(g["hearth_requests_running"] == 0 and g["hearth_requests_waiting"] == 0,
          "idle: hearth_requests_running and hearth_requests_waiting 0", str(g))
    for c in ["hearth_prompt_tokens_total", "hearth_generated_tokens_total", "hearth_prefix_cache_queries_total",
              "hearth_prefix_cache_hits_total", "hearth_prompt_tokens_cached_total"]:
        check((m.get(c) or 0) > 0, f"{c} > 0", str(m.get(c)))
    check((m.get("hearth_prefix_cache_queries_total") or 0) >= (m.get("hearth_prefix_cache_hits_total") or 0),
          "prefix cache queries >= hits", f"queries {m.get('hearth_prefix_cache_queries_total')}, "
          f"hits {m.get('hearth_prefix_cache_hits_total')}")
    for reason in ("stop", "length"):
        check(finished(m, reason) > 0, f"hearth_requests_total{{finish_reason=\"{reason}\"}} > 0",
              str(m.series("hearth_requests_total")))
    for code in ("200", "400", "404", "405", "413"):
        check((m.get("hearth_http_responses_total", status=code) or 0) > 0,
              f"hearth_http_responses_total{{status=\"{code}\"}} > 0",
              str(m.series("hearth_http_responses_total")))
    for h in HISTOGRAMS:
        check((m.get(h + "_count") or 0) > 0, f"{h}_count > 0", str(m.get(h + "_count")))


@section("main")
def access_log():
    s = srv("main")
    with s.cond:
        lines = list(s.lines)
    pat = re.compile(r"^hearth: serve: (\S+) (GET|POST|PUT|DELETE) (\S+) (\d{3}) prompt=(\d+) cached=(\d+) "
                     r"completion=(\d+) ttft=(\d+(?:\.\d+)?)ms tpot=(\d+(?:\.\d+)?)ms total=(\d+(?:\.\d+)?)ms$")
    log = [m for m in (pat.match(l) for l in lines) if m]
    chat = [m for m in log if m.group(3) == "/v1/chat/completions" and m.group(4) == "200" and int(m.group(7)) > 0]
    check(chat, "the access log has lines 'REQID POST /v1/chat/completions 200 prompt= cached= completion= "
          "ttft= tpot= total='", " | ".join(l for l in lines if "/v1/chat" in l)[:400] or "no such line")
    check(any(m.group(4) == "404" and m.group(3) == "/nope" for m in log)
          or any(re.match(r"^hearth: serve: \S+ GET /nope 404\b", l) for l in lines),
          "the access log has the 404 of GET /nope")
    # monitoring polls /health and /metrics: they are left out of the log
    check(not any(re.match(r"^hearth: serve: \S+ GET /(health|metrics) ", l) for l in lines),
          "the access log leaves out GET /health and GET /metrics")
    ids = [m.group(1) for m in log]
    check(len(ids) == len(set(ids)), "the access log's request ids are distinct",
          f"{len(ids) - len(set(ids))} repeated")


# ---------------------------------------------------------------- cancellation

def long_body(stream=True, **kw):
    b = {"messages": [{"role": "user", "content": "Tell me a very long story."}], "max_tokens": LONG,
         "temperature": 1, "seed": 7, "logit_bias": NO_EOS, "stream": stream}
    b.update(kw)
    return b


def open_until_content(s, body=None, key=None):
    """A long streaming chat request read up to its first content delta."""
    r = Raw(s, "/v1/chat/completions", body or long_body(), key=key)
    status = r.read_head()
    if status != 200:
        data = r.body()
        r.close()
        raise Abort(f"a long streaming request: status {status} {short(data)}")
    it = r.events()
    for data in it:
        need(data != "[DONE]", "the long stream ended before any content")
        j = json.loads(data)
        need("error" not in j, f"the long stream sent an error: {short(j)}")
        if any((c.get("delta") or {}).get("content") for c in j.get("choices") or []):
            return r, it
    raise Abort("the long stream ended before any content")


def settled(s, base_used, what, cancelled_before, n_cancelled=1):
    """Waits for the server to free what a closed request held."""
    def idle():
        m = metrics(s)
        return (m.get("hearth_requests_running") == 0 and m.get("hearth_requests_waiting") == 0
                and m.get("hearth_kv_blocks_used", 1e9) <= base_used
                and finished(m, "cancelled") >= cancelled_before + n_cancelled), m

    t0 = time.monotonic()
    done, m = wait_for(idle, SETTLE, 0.05)
    check(m.get("hearth_requests_running") == 0 and m.get("hearth_requests_waiting") == 0,
          f"{what}: hearth_requests_running and _waiting back to 0",
          f"running {m.get('hearth_requests_running')}, waiting {m.get('hearth_requests_waiting')} after {SETTLE} s")
    check(m.get("hearth_kv_blocks_used", 1e9) <= base_used, f"{what}: hearth_kv_blocks_used back to its baseline",
          f"{m.get('hearth_kv_blocks_used')} (cached {m.get('hearth_kv_blocks_cached')}), baseline {base_used}, "
          f"after {SETTLE} s")
    check(finished(m, "cancelled") >= cancelled_before + n_cancelled,
          f"{what}: hearth_requests_total{{finish_reason=\"cancelled\"}} rose by {n_cancelled}",
          f"{cancelled_before} -> {finished(m, 'cancelled')}; {m.series('hearth_requests_total')}")
    if done:
        ok(f"{what}: freed in {time.monotonic() - t0:.2f} s")
    return m


@section("single")
def cancel():
    s = srv("single")
    m0 = metrics(s)
    base = m0.get("hearth_kv_blocks_used")
    need(base is not None, "no hearth_kv_blocks_used")

    # Decoding: the client reads the first content and goes away.
    g0 = m0.get("hearth_generated_tokens_total", 0)
    r, _ = open_until_content(s)
    m = metrics(s)
    check(m.get("hearth_requests_running") == 1 and m.get("hearth_kv_blocks_used", 0) > base,
          "a decoding request is running and holds KV blocks",
          f"running {m.get('hearth_requests_running')}, used {m.get('hearth_kv_blocks_used')}, baseline {base}")
    r.close()
    m1 = settled(s, base, "stream closed while decoding", finished(m0, "cancelled"))
    check(m1.get("hearth_generated_tokens_total", 0) - g0 < LONG / 2,
          "the cancelled stream stopped generating", f"{m1.get('hearth_generated_tokens_total', 0) - g0} tokens")

    # Waiting in the queue: the one sequence is busy; the second request
    # waits and its client goes away before it starts.
    m0 = metrics(s)
    busy, busy_events = open_until_content(s)
    try:
        q = Raw(s, "/v1/chat/completions", long_body(seed=8))
        done, m = wait_for(lambda: (lambda m: (m.get("hearth_requests_waiting") == 1, m))(metrics(s)), 5)
        check(done, "a second request waits in the queue (--parallel 1)",
              f"waiting {m.get('hearth_requests_waiting')}, running {m.get('hearth_requests_running')}")
        q.close()
        done, m = wait_for(lambda: (lambda m: (m.get("hearth_requests_waiting") == 0
                                               and finished(m, "cancelled") > finished(m0, "cancelled"), m))(
            metrics(s)), SETTLE)
        check(done and m.get("hearth_requests_running") == 1,
              "the queued request whose client went away is dropped; the running one goes on",
              f"waiting {m.get('hearth_requests_waiting')}, running {m.get('hearth_requests_running')}, "
              f"cancelled {finished(m0, 'cancelled')} -> {finished(m, 'cancelled')}")
        more = len(_take(busy_events, 3))
        check(more == 3, "the running stream still sends events", f"{more} more events")
    finally:
        busy.close()
    settled(s, base, "queued request closed, then the running one", finished(m0, "cancelled"), 2)

    # Without streaming: the client goes away while the reply is generated.
    m0 = metrics(s)
    g0 = m0.get("hearth_generated_tokens_total", 0)
    r = Raw(s, "/v1/chat/completions", long_body(stream=False))
    done, m = wait_for(lambda: (lambda m: (m.get("hearth_requests_running") == 1
                                           and m.get("hearth_generated_tokens_total", 0) > g0 + 5, m))(metrics(s)), 5)
    check(done, "a non-stream request is generating",
          f"running {m.get('hearth_requests_running')}, generated {m.get('hearth_generated_tokens_total', 0) - g0}")
    r.close()
    m1 = settled(s, base, "non-stream request closed mid-way", finished(m0, "cancelled"))
    check(m1.get("hearth_generated_tokens_total", 0) - g0 < LONG / 2,
          "the cancelled non-stream request stopped generating",
          f"{m1.get('hearth_generated_tokens_total', 0) - g0} tokens")

    j = ok_json(s, "/v1/chat/completions", chat_body(max_tokens=4), "after the cancellations")
    check(j["usage"]["completion_tokens"] >= 1, "the server answers after the cancellations")


def _take(it, n):
    """Up to n more events of an open stream's events."""
    out = []
    for data in it:
        out.append(data)
        if len(out) == n:
            break
    return out


@section("single")
def queue_full():
    s = srv("single")
    m0 = metrics(s)
    base = m0.get("hearth_kv_blocks_used")
    busy, _ = open_until_content(s)
    queued = None
    try:
        queued = Raw(s, "/v1/chat/completions", long_body(seed=9))
        done, m = wait_for(lambda: (lambda m: (m.get("hearth_requests_waiting") == 1, m))(metrics(s)), 5)
        need(done, f"the second request did not wait in the queue: waiting {m.get('hearth_requests_waiting')}")
        results = [None] * 3

        def fire(i):
            try:
                results[i] = post(s, "/v1/chat/completions", chat_body(max_tokens=LONG, logit_bias=NO_EOS))
            except Exception as e:
                results[i] = f"{type(e).__name__}: {e}"

        threads = [threading.Thread(target=fire, args=(i,), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=IO_TIMEOUT + 5)
        for i, r in enumerate(results):
            if not isinstance(r, Resp):
                fail(f"request {i} beyond --max-queue: {r}")
                continue
            p = error_problems(r, 429, code="queue_full", etype="rate_limit_error")
            if r.header("retry-after") != "1":
                p.append(f"Retry-After {r.header('retry-after')!r}")
            check(not p, f"request {i} beyond --max-queue 1: 429 queue_full, Retry-After: 1", "; ".join(p))
    finally:
        if queued:
            queued.close()
        busy.close()
    settled(s, base, "after the full queue", finished(m0, "cancelled"), 2)


@section("slow")
def timeout():
    s = srv("slow")
    m0 = metrics(s)
    base = m0.get("hearth_kv_blocks_used")
    t0 = time.monotonic()
    r = post(s, "/v1/chat/completions", long_body(stream=False, max_tokens=8000))
    dt = time.monotonic() - t0
    expect_error(r, "a request past --timeout 1: 504 timeout", 504, code="timeout")
    check(dt < 10, "the deadline ends it in time", f"{dt:.1f} s")
    st = Stream(s, "/v1/chat/completions", long_body(max_tokens=8000))
    p = st.framing()
    chunks = st.chunks() if st.status == 200 else []
    err = [c for c in chunks if "error" in c]
    check(not p and len(err) == 1 and chunks[-1] is err[0] and (err[0]["error"] or {}).get("code") == "timeout",
          "a stream past --timeout 1: a data: {\"error\"} event with code timeout, then [DONE]",
          "; ".join(p) + f" last events {[short(c, 150) for c in chunks[-2:]]}")
    done, m = wait_for(lambda: (lambda m: (finished(m, "timeout") >= finished(m0, "timeout") + 2
                                           and m.get("hearth_kv_blocks_used", 1e9) <= base, m))(metrics(s)), SETTLE)
    check(done, "hearth_requests_total{finish_reason=\"timeout\"} rose by 2 and the KV blocks are freed",
          f"timeout {finished(m0, 'timeout')} -> {finished(m, 'timeout')}, used {m.get('hearth_kv_blocks_used')} "
          f"baseline {base}")


# ---------------------------------------------------------------- keys, drain

def raw_exchange(s, data, shut=False, timeout=IO_TIMEOUT):
    """Sends data on a new connection (then shuts the sending side down
    with shut) and reads until the server closes; gives the bytes, and
    whether the server closed the connection before the timeout."""
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=timeout)
    try:
        try:
            sock.sendall(data)
            if shut:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = b""
        try:
            while True:
                d = sock.recv(65536)
                if not d:
                    return got, True
                got += d
        except ConnectionResetError:
            return got, True
        except (socket.timeout, TimeoutError):
            return got, False
    finally:
        sock.close()


def statuses(data):
    """The status codes of the responses in data."""
    return [int(m) for m in re.findall(rb"HTTP/1\.[01] (\d{3}) [A-Z]", data)]


def split_response(data):
    """(status, headers, body) of the first response in data, a body of
    Content-Length or chunked."""
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    h = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    if "content-length" in h:
        return status, h, rest[:int(h["content-length"])]
    body = b""
    while "chunked" in h.get("transfer-encoding", ""):
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        body, rest = body + rest[:size], rest[size + 2:]
    return status, h, body


@section("http")
def port_taken():
    s = srv("http")
    t0 = time.monotonic()
    p = subprocess.run([HEARTH, "serve", "-m", MODEL, "--host", "127.0.0.1", "--port", str(s.port)],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=STARTUP, preexec_fn=die_with_parent)
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == 1 and f"hearth: serve: cannot listen on 127.0.0.1 port {s.port}: Address already in use"
          in err and "serve: ready" not in err,
          "a second server on a port that one serves exits 1: 'cannot listen on ... Address already in use'",
          f"exit status {p.returncode} after {time.monotonic() - t0:.1f} s; stderr: {short(err, 300)}")
    answered = sum(request(s, "GET", "/health").status == 200 for _ in range(10))
    check(answered == 10, "the first server still answers every request on its port", f"{answered} of 10")


@section("http")
def framing():
    s = srv("http")
    host = f"Host: 127.0.0.1:{s.port}\r\n".encode()
    cases = [
        ("two different Content-Length values", b"POST /tokenize HTTP/1.1\r\n" + host +
         b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}x", 400),
        ("Content-Length that is not a number", b"POST /tokenize HTTP/1.1\r\n" + host +
         b"Content-Length: 2x\r\n\r\n{}", 400),
        ("Content-Length and Transfer-Encoding", b"POST /tokenize HTTP/1.1\r\n" + host +
         b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        ("a transfer coding other than chunked", b"POST /tokenize HTTP/1.1\r\n" + host +
         b"Transfer-Encoding: gzip\r\n\r\nxxxx", 501),
        ("a chunk size that overflows", b"POST /tokenize HTTP/1.1\r\n" + host +
         b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffffffffff\r\n", 413),
        ("a chunk size that does not parse", b"POST /tokenize HTTP/1.1\r\n" + host +
         b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("a body over --max-body", b"POST /tokenize HTTP/1.1\r\n" + host + b"Content-Length: 5000\r\n\r\n", 413),
        ("a POST without a length", b"POST /tokenize HTTP/1.1\r\n" + host + b"\r\n", 411),
        ("a folded header line", b"GET /health HTTP/1.1\r\n" + host + b"X-A: 1\r\n 2\r\n\r\n", 400),
        ("whitespace before a colon", b"GET /health HTTP/1.1\r\n" + host + b"X-A : 1\r\n\r\n", 400),
        ("a bare CR", b"GET /health HTTP/1.1\r\n" + host + b"X-A: 1\r2\r\n\r\n", 400),
        ("a NUL in a header", b"GET /health HTTP/1.1\r\n" + host + b"X-A: 1\x002\r\n\r\n", 400),
        ("HTTP/1.1 without Host", b"GET /health HTTP/1.1\r\n\r\n", 400),
        ("HTTP/2.0", b"GET /health HTTP/2.0\r\n" + host + b"\r\n", 505),
        ("a request line too long", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + host + b"\r\n", 414),
        ("a head too large", b"GET /health HTTP/1.1\r\n" + host + b"X-Pad: " + b"a" * 17000 + b"\r\n\r\n", 431),
        ("too many header fields", b"GET /health HTTP/1.1\r\n" + host + b"X: 1\r\n" * 101 + b"\r\n", 431),
    ]
    for what, data, status in cases:
        got, closed = raw_exchange(s, data, timeout=8)
        st = statuses(got)
        ok_json_body = False
        if st:
            _, h, body = split_response(got)
            try:
                ok_json_body = isinstance(json.loads(body)["error"]["code"], str)
            except (ValueError, KeyError, TypeError):
                pass
        check(st == [status] and closed and ok_json_body,
              f"{what}: one {status} with a JSON error, then the connection closes",
              f"statuses {st}, closed {closed}: {short(got, 300)}")

    # valid forms: pipelining, chunked with extensions and a trailer, HTTP/1.0, HEAD, Expect
    body = b'{"content":"Once upon a time"}'
    two = (b"POST /tokenize HTTP/1.1\r\n" + host + b"Content-Length: %d\r\n\r\n" % len(body) + body +
           b"GET /health HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n")
    got, closed = raw_exchange(s, two)
    check(statuses(got) == [200, 200] and closed, "two pipelined requests in one write: two 200s, in order",
          f"statuses {statuses(got)}: {short(got, 300)}")
    chunked = (b"POST /tokenize HTTP/1.1\r\n" + host + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
               b"5;ext=1\r\n" + body[:5] + b"\r\n%x\r\n" % (len(body) - 5) + body[5:] + b"\r\n0\r\nX-T: 1\r\n\r\n")
    got, _ = raw_exchange(s, chunked)
    st, _, b = split_response(got) if statuses(got) else (None, None, b"")
    ref = request(s, "POST", "/tokenize", raw=body)
    check(st == 200 and b == ref.data, "a chunked body with extensions and a trailer is read whole",
          f"{short(got, 300)} vs {ref}")
    got, closed = raw_exchange(s, b"GET /health HTTP/1.0\r\n\r\n")
    check(statuses(got) == [200] and closed and got.endswith(b'{"status":"ok"}'),
          "HTTP/1.0 without keep-alive: the response, then the close", short(got, 300))
    got, closed = raw_exchange(s, b"HEAD /v1/models HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n")
    check(statuses(got) == [200] and got.endswith(b"\r\n\r\n") and b"content-length:" in got.lower(),
          "HEAD: the head alone, with the length of the GET's body", short(got, 300))
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=IO_TIMEOUT)
    try:
        sock.sendall(b"POST /tokenize HTTP/1.1\r\n" + host + b"Content-Length: %d\r\n" % len(body) +
                     b"Expect: 100-continue\r\nConnection: close\r\n\r\n")
        first = sock.recv(65536)
        sock.sendall(body)
        rest = b""
        while True:
            d = sock.recv(65536)
            if not d:
                break
            rest += d
    finally:
        sock.close()
    check(first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n") and statuses(rest or first[25:]) == [200],
          "Expect: 100-continue: '100 Continue' before the body, then the response", short(first + rest, 300))


@section("http")
def half_close():
    s = srv("http")
    host = f"Host: 127.0.0.1:{s.port}\r\n".encode()
    for stream in (False, True):
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0,
                           "logit_bias": NO_EOS, "stream": stream}).encode()
        data = (b"POST /v1/completions HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body)
        got, closed = raw_exchange(s, data, shut=True)
        what = "a stream" if stream else "a request that does not stream"
        if not statuses(got):
            fail(f"{what}, its client half-closed after the request: no response: {short(got, 300)}")
            continue
        st, h, b = split_response(got)
        if stream:
            # a chunked body, ended by its last chunk
            events = [e for e in b.split(b"\n\n") if e.startswith(b"data: ")]
            good = (st == 200 and events and events[-1] == b"data: [DONE]" and b.endswith(b"\n\n")
                    and got.endswith(b"0\r\n\r\n"))
        else:
            # all of the body: of Content-Length when the answer was ready
            # before the server saw the half-close, else chunked (the
            # server then starts the response at once)
            try:
                whole = (len(b) == int(h["content-length"]) if "content-length" in h
                         else "chunked" in h.get("transfer-encoding", "") and got.endswith(b"0\r\n\r\n"))
                good = st == 200 and json.loads(b)["usage"]["completion_tokens"] == 24 and whole
            except (ValueError, KeyError, TypeError):
                good = False
        check(good, f"{what}, its client half-closed after the request: the whole response", short(got, 400))


@section("http")
def slow_clients():
    s = srv("http")
    stop = threading.Event()
    socks = []

    def trickle(sock):
        # a byte a second of a request head that never ends
        data = b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 100
        try:
            for i in range(len(data)):
                if stop.wait(0.5):
                    return
                sock.sendall(data[i:i + 1])
        except OSError:
            pass

    for _ in range(12):
        try:
            sk = socket.create_connection(("127.0.0.1", s.port), timeout=IO_TIMEOUT)
        except OSError:
            continue
        socks.append(sk)
        threading.Thread(target=trickle, args=(sk,), daemon=True).start()
    try:
        slowest = 0.0
        failed = []
        t_end = time.monotonic() + 6
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            try:
                r = request(s, "GET", "/health", timeout=3)
                if r.status != 200:
                    failed.append(str(r))
            except OSError as e:
                failed.append(f"{type(e).__name__}: {e}")
            slowest = max(slowest, time.monotonic() - t0)
            time.sleep(0.2)
        check(not failed and slowest < 2, "12 clients sending their heads a byte at a time at --max-connections 8: "
              "/health still answers at once", f"slowest {slowest:.2f} s, failures {failed[:3]}")
    finally:
        stop.set()
        for sk in socks:
            sk.close()
    # a head that keeps trickling past --request-timeout 3 gets 408 and the close
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=IO_TIMEOUT)
    got = b""
    t0 = time.monotonic()
    try:
        for c in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 40:
            sock.sendall(bytes([c]))
            time.sleep(0.2)
            sock.setblocking(False)
            try:
                got += sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                pass
            sock.setblocking(True)
            if got:
                break
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        sock.close()
    check(statuses(got) == [408] and time.monotonic() - t0 < 6,
          "a head that trickles in past --request-timeout: 408, whatever its progress",
          f"after {time.monotonic() - t0:.1f} s: {short(got, 200)}")


@section("http")
def churning_clients():
    # Clients that send one byte of a head and reconnect the moment they
    # are dropped, three times as many as --max-connections 8: a client
    # whose whole request arrives with its connection is still answered.
    s = srv("http")
    stop = threading.Event()
    churned = [0]

    def churn():
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", s.port), timeout=IO_TIMEOUT) as sk:
                    sk.sendall(b"G")
                    churned[0] += 1
                    while not stop.is_set():
                        r, _, _ = select.select([sk], [], [], 0.2)
                        if r and not sk.recv(4096):
                            break
            except OSError:
                time.sleep(0.01)

    threads = [threading.Thread(target=churn, daemon=True) for _ in range(24)]
    for t in threads:
        t.start()
    answered, failed = 0, []
    try:
        time.sleep(0.5)
        for _ in range(50):
            try:
                got, _ = raw_exchange(s, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n"
                                         "Connection: close\r\n\r\n".encode(), timeout=5)
                if statuses(got) == [200]:
                    answered += 1
                else:
                    failed.append(short(got, 80) or "closed without a response")
            except OSError as e:
                failed.append(f"{type(e).__name__}: {e}")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
    check(churned[0] >= 24 and answered == 50,
          "24 clients that send one byte and reconnect at once, at --max-connections 8: "
          "every complete request on a new connection is answered",
          f"{answered} of 50 answered ({churned[0]} churning connections); {failed[:3]}")


@section("keys")
def api_key():
    s = srv("keys")
    r = request(s, "GET", "/health")
    check(r.status == 200, "with --api-key, /health needs no key", str(r))
    r = request(s, "GET", "/")
    check(r.status == 200 and b"<!DOCTYPE html>" in r.data, "with --api-key, the chat page needs no key", str(r))
    for method, path, body in [("GET", "/v1/models", None), ("GET", "/metrics", None),
                               ("POST", "/v1/chat/completions", chat_body(max_tokens=2)),
                               ("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 2}),
                               ("POST", "/tokenize", {"content": "Once"})]:
        expect_error(request(s, method, path, body=body), f"{method} {path} without a key: 401", 401,
                     code="invalid_api_key")
        expect_error(request(s, method, path, body=body, key="k-wrong"), f"{method} {path} with a wrong key: 401",
                     401, code="invalid_api_key")
        for k in ("k-one", "k-two"):
            r = request(s, method, path, body=body, key=k)
            check(r.status == 200, f"{method} {path} with key {k}: 200", str(r))
    r = request(s, "GET", "/v1/models")
    check(r.header("WWW-Authenticate") == "Bearer", "a 401 has 'WWW-Authenticate: Bearer' (RFC 6750 3)",
          f"WWW-Authenticate {r.header('WWW-Authenticate')!r}")
    r = request(s, "GET", "/v1/models", headers={"Authorization": "k-one"})
    expect_error(r, "a key without 'Bearer': 401", 401, code="invalid_api_key")
    r = request(s, "GET", "/v1/models", headers={"Authorization": "Bearer k-one-more"})
    expect_error(r, "a key with the right prefix: 401", 401, code="invalid_api_key")


@section("keyfile")
def api_key_file():
    s = srv("keyfile")
    r = request(s, "GET", "/v1/models", key="k-file")
    check(r.status == 200, "--api-key-file: its key works", str(r))
    expect_error(request(s, "GET", "/v1/models", key="# the keys of the test"),
                 "--api-key-file: a comment line is no key", 401, code="invalid_api_key")
    expect_error(request(s, "GET", "/v1/models"), "--api-key-file: no key: 401", 401, code="invalid_api_key")
    for path in ("/", "/index.html"):
        for key in (None, "k-file"):
            expect_error(request(s, "GET", path, key=key), f"--no-webui: GET {path} {'with' if key else 'without'} "
                         "the key: 404", 404, code="not_found")


@section("keys")
def drain():
    s = srv("keys")
    n = 1000
    body = {"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": n, "temperature": 1,
            "seed": 3, "logit_bias": NO_EOS, "stream": True, "stream_options": {"include_usage": True}}
    r = Raw(s, "/v1/chat/completions", body, key="k-one")
    try:
        status = r.read_head()
        if status != 200:
            raise Abort(f"the stream to drain: status {status} {short(r.body())}")
        headers, chunked = r.headers, r.chunked
        it = r.events()
        first = []
        for data in it:
            first.append(data)
            if len(first) >= 3:
                break
        s.proc.send_signal(signal.SIGTERM)
        seen = []

        def draining():
            try:
                h = request(s, "GET", "/health", timeout=2)
            except OSError as e:
                seen.append(f"{type(e).__name__}: {e}")
                return True, None
            seen.append(str(h))
            return h.status == 503, h

        done, h = wait_for(draining, 5, 0.02)
        check(h is not None and h.status == 503 and h.json == {"status": "draining"},
              "after SIGTERM, /health answers 503 {\"status\":\"draining\"}", f"answers {seen[-3:]}")
        if h is not None:
            expect_error(post(s, "/v1/chat/completions", chat_body(max_tokens=2), key="k-one"),
                         "while draining, a new request: 503 shutting_down", 503, code="shutting_down")
        rest = list(it)
        st_data = first + rest
        fake = Stream.__new__(Stream)
        fake.status, fake.version, fake.headers, fake.chunked = 200, r.version, headers, chunked
        fake.data, fake.problems = st_data, r.problems
        p = fake.framing()
        texts, fin, usage, p2 = chat_stream(fake.chunks(), include_usage=True)
        check(not p and not p2 and fin == ["length"] and isinstance(usage, dict)
              and usage.get("completion_tokens") == n,
              f"the stream running at SIGTERM ends normally: {n} tokens, finish_reason length, [DONE]",
              "; ".join((p + p2)[:4]) + f" finish {fin}, usage {short(usage)}")
    finally:
        r.close()
    try:
        rc = s.proc.wait(timeout=20)
        check(rc == 0, "the drained server exits with status 0", f"status {rc}; stderr: {s.log(5)}")
    except subprocess.TimeoutExpired:
        fail(f"the server did not exit within 20 s of SIGTERM; stderr: {s.log(5)}")


@section("grace")
def grace():
    # --grace 1: requests still running a second after SIGTERM end; the
    # stream with an error event and [DONE], the non-stream one with 503.
    s = srv("grace")
    n = 8000
    body = {"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": n, "temperature": 1,
            "seed": 5, "logit_bias": NO_EOS, "stream": True}
    r, it = open_until_content(s, body)
    plain = Raw(s, "/v1/chat/completions", dict(body, stream=False, seed=6))
    try:
        done, m = wait_for(lambda: (lambda m: (m.get("hearth_requests_running") == 2, m))(metrics(s)), 5)
        need(done, f"two requests should be running: running {m.get('hearth_requests_running')}")
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        rest = list(it)
        dt = time.monotonic() - t0
        chunks = []
        for d in rest:
            if d != "[DONE]":
                chunks.append(json.loads(d))
        err = [c for c in chunks if "error" in c]
        check(rest and rest[-1] == "[DONE]" and len(err) == 1 and chunks[-1] is err[0] and not r.problems,
              "past --grace, the stream ends with a data: {\"error\"} event, then [DONE]",
              f"{r.problems} last events {[short(x, 150) for x in rest[-2:]]}")
        check(dt < 8, "the stream ends about --grace 1 s after SIGTERM", f"{dt:.1f} s")
        try:
            status = plain.read_head()
            resp = Resp(status, plain.headers, plain.body())
            expect_error(resp, "past --grace, the non-stream request gets 503", 503)
        except (OSError, EOFError) as e:
            fail(f"past --grace, the non-stream request got no answer: {type(e).__name__}: {e}")
    finally:
        r.close()
        plain.close()
    try:
        rc = s.proc.wait(timeout=15)
        check(rc == 0, "the server exits with status 0 after the grace period", f"status {rc}; stderr: {s.log(5)}")
    except subprocess.TimeoutExpired:
        fail(f"the server did not exit within 15 s of SIGTERM with --grace 1; stderr: {s.log(5)}")


@section(None)
def exit_status():
    for name, s in servers.items():
        if not s.ready or not s.alive():
            continue
        s.proc.send_signal(signal.SIGTERM)
        try:
            rc = s.proc.wait(timeout=15)
            check(rc == 0, f"idle server {name}: SIGTERM, exit status 0", f"status {rc}; stderr: {s.log(5)}")
        except subprocess.TimeoutExpired:
            fail(f"idle server {name} did not exit within 15 s of SIGTERM")


# ---------------------------------------------------------------- driver

def watchdog():
    say(f"FAIL: the test ran past {WALL_LIMIT:.0f} s; killing the servers")
    for s in Server.started:
        say(f"  {s.name} stderr: {s.log(5)}")
    kill_all()
    os._exit(1)


def on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main():
    global section_name
    if not os.path.exists(MODEL):
        print(f"SKIP: {MODEL} is missing", file=sys.stderr)
        return 77
    signal.signal(signal.SIGTERM, on_signal)
    dog = threading.Timer(WALL_LIMIT, watchdog)
    dog.daemon = True
    dog.start()
    chosen = [x for x in sections if not ONLY or x[0] in ONLY or x[1] is None]
    t_start = time.monotonic()
    dead = set()
    try:
        for name in dict.fromkeys(x[1] for x in chosen if x[1]):
            args = SERVERS[name]
            servers[name] = Server(name, *(args() if callable(args) else args))
        for name, server, fn in chosen:
            section_name = name
            say(f"--- {name}" + (f" (server {server})" if server else ""))
            t0 = time.monotonic()
            try:
                fn()
            except Abort as e:
                fail(f"{e}")
            except (socket.timeout, TimeoutError) as e:
                fail(f"a socket operation timed out after {IO_TIMEOUT:.0f} s (is the server hung?): {e}")
            except (OSError, EOFError, http.client.HTTPException) as e:
                fail(f"{type(e).__name__}: {e}" + (f"; server stderr: {servers[server].log(5)}" if server else ""))
            except Exception:
                fail("the test itself failed:\n" + traceback.format_exc())
            if (server and servers[server].ready and not servers[server].alive() and name not in ("drain", "grace")
                    and server not in dead):
                dead.add(server)
                fail(f"server {server} died (exit status {servers[server].proc.poll()}); "
                     f"stderr: {servers[server].log(10)}")
            say(f"    ({time.monotonic() - t0:.1f} s)")
    finally:
        kill_all()
        dog.cancel()
        for path in [key_file.name] + made_files:
            try:
                os.unlink(path)
            except OSError:
                pass
    # The failures once more at the end, where a log's tail shows them.
    for f in failures:
        say(f"FAILED: {f}")
    say(f"{len(failures)} check(s) failed in {time.monotonic() - t_start:.1f} s" if failures
        else f"all checks passed in {time.monotonic() - t_start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
