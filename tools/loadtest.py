#!/usr/bin/env python3
"""loadtest.py -- load generator for OpenAI-compatible completion servers.

N concurrent clients send streaming requests to /v1/completions (default) or
/v1/chat/completions and time each one:

  TTFT   time from sending the request to the first chunk with content
  TPOT   mean time between content chunks after the first (per request)
  tokens output tokens: the usage of the final chunk (stream_options
         include_usage), or else the number of content chunks

and reports the aggregate output tokens/s (all output tokens over the wall
time of the run), TTFT and TPOT p50/p95, the request count and the errors,
as a table and with --json as one JSON object.

Load: closed loop by default (each client sends its next request when its
previous one ends), or open loop with --rate R (Poisson arrivals of R
requests/s, at most --clients in flight; TTFT is then also reported from
the scheduled arrival, which includes time spent waiting for a free client).
The run ends after --requests requests or --duration seconds, whichever
comes first; requests running at the deadline are finished and counted.

Prompt: for /v1/completions the prompt is sent as an array of
--prompt-tokens token ids, drawn at random from [--id-min, --id-max) with
the generator seeded by --seed, a fresh draw for each request, so the
prompt length is exact on any server and prefix caches do not help.  For
chat (which needs text) the message is built from random words and, where
the server has POST /tokenize, trimmed or grown to the wanted count (the
chat template adds its own tokens on top).  Each request asks for
--max-tokens tokens with "ignore_eos": true so that generation runs to the
limit (--eos-id ID adds a logit_bias of -100 on that token as well, for a
server that does not know ignore_eos).

Servers: --server-cmd CMD starts the server (a shell command; {port} in it
and in --url is replaced by a free port), waits until GET /health answers
200, runs the load, then stops it with SIGTERM.  --compare NAME=CMD
(repeatable) runs the same load against each command in turn (--rounds
times, the order alternating between rounds) and prints each result and
the ratio of each to the first.

Examples:
  tools/loadtest.py --url http://127.0.0.1:8080 -c 8 -n 64 -p 128 -g 64
  tools/loadtest.py -c 8 -p 128 -g 64 --duration 60 \\
      --compare "hearth=src/hearth serve -m M.gguf -t 2 -np 8 --port {port}" \\
      --compare "llama=llama-server -m M.gguf -t 2 -np 8 -c 4096 --port {port}"

Python 3 standard library only.
"""

import argparse
import http.client
import json
import math
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

WORDS = ("the a of and to in is was that it for on with as his he be at by "
         "had not are but from or have an they which one you were her all "
         "she there would their we him been has when who will more no if "
         "out so said what up its about into than them can only other new "
         "some could time these two may then do first any my now such like "
         "our over man me even most made after also did many before must "
         "through back years where much your way well down should because "
         "each just those people how too little state good very make world "
         "still own see men work long get here between both life being "
         "under never day same another know while last might us great old "
         "year off come since against go came right used take three").split()


def percentile(values, q):
    """The q-th percentile (0..100) of values, linear between ranks."""
    if not values:
        return float("nan")
    v = sorted(values)
    if len(v) == 1:
        return v[0]
    k = (len(v) - 1) * q / 100.0
    lo = math.floor(k)
    hi = math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class Target:
    """Where requests go: host, port, path prefix, TLS or not."""

    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https"):
            raise ValueError("--url must be http:// or https://")
        self.https = u.scheme == "https"
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if self.https else 80)
        self.base = u.path.rstrip("/")
        if self.base.endswith("/v1"):
            self.base = self.base[:-3]

    def conn(self, timeout):
        if self.https:
            import ssl
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return http.client.HTTPSConnection(self.host, self.port,
                                               timeout=timeout, context=ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


def simple_request(target, method, path, body=None, headers=None, timeout=10):
    """One request on a fresh connection; returns (status, body bytes)."""
    c = target.conn(timeout)
    try:
        h = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        c.request(method, target.base + path, body=data, headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class PromptMaker:
    """Builds the prompt of each request, reproducibly from --seed."""

    def __init__(self, args, target, headers):
        self.args = args
        self.rng = random.Random(args.seed)
        self.lock = threading.Lock()
        self.ratio = None  # tokens per word, measured through /tokenize
        if args.endpoint == "chat" and args.prompt_tokens > 0:
            self.calibrate(target, headers)

    def calibrate(self, target, headers):
        rng = random.Random(self.args.seed ^ 0x5eed)
        text = " ".join(rng.choice(WORDS) for _ in range(400))
        try:
            st, body = simple_request(target, "POST", "/tokenize",
                                      {"content": text}, headers)
            if st == 200:
                n = len(json.loads(body)["tokens"])
                if n > 0:
                    self.ratio = n / 400.0
        except (OSError, ValueError, KeyError, http.client.HTTPException):
            pass
        if self.ratio is None:
            self.ratio = 1.3  # a typical English word/token ratio

    def next(self):
        a = self.args
        with self.lock:
            if a.endpoint == "completions":
                return [self.rng.randrange(a.id_min, a.id_max)
                        for _ in range(a.prompt_tokens)]
            n_words = max(1, int(round(a.prompt_tokens / self.ratio)))
            return " ".join(self.rng.choice(WORDS) for _ in range(n_words))


class Result:
    __slots__ = ("ok", "status", "error", "ttft", "ttft_sched", "tpot",
                 "tokens", "chunks", "t_start", "t_end", "queue_delay",
                 "prompt_tokens")

    def __init__(self):
        self.ok = False
        self.status = None
        self.error = None
        self.ttft = None
        self.ttft_sched = None
        self.tpot = None
        self.tokens = 0
        self.chunks = 0
        self.t_start = None
        self.t_end = None
        self.queue_delay = 0.0
        self.prompt_tokens = None


def build_body(args, prompt):
    body = {"model": args.model, "max_tokens": args.max_tokens,
            "stream": True, "stream_options": {"include_usage": True},
            "temperature": args.temperature, "ignore_eos": not args.no_ignore_eos}
    bias = {}
    if args.eos_id is not None:
        bias[str(args.eos_id)] = -100
    for lo, hi in args.ban:
        for t in range(lo, hi + 1):
            bias[str(t)] = -100
    if bias:
        body["logit_bias"] = bias
    if args.endpoint == "completions":
        body["prompt"] = prompt
    else:
        body["messages"] = [{"role": "user", "content": prompt}]
    return body


def chunk_text(obj, chat):
    """The content text of one streamed chunk ('' for none)."""
    out = []
    for ch in obj.get("choices") or ():
        if chat:
            d = ch.get("delta") or {}
            t = d.get("content")
        else:
            t = ch.get("text")
        if isinstance(t, str):
            out.append(t)
    return "".join(out)


def one_request(args, target, headers, prompt, t_sched=None):
    """Send one streaming request and time it."""
    res = Result()
    chat = args.endpoint == "chat"
    path = "/v1/chat/completions" if chat else "/v1/completions"
    data = json.dumps(build_body(args, prompt)).encode()
    h = dict(headers)
    h["Content-Type"] = "application/json"
    h["Accept"] = "text/event-stream"
    c = target.conn(args.timeout)
    res.t_start = time.monotonic()
    if t_sched is not None:
        res.queue_delay = max(0.0, res.t_start - t_sched)
    t_first = t_last = None
    usage_tokens = None
    done = False
    try:
        c.request("POST", target.base + path, body=data, headers=h)
        r = c.getresponse()
        res.status = r.status
        if r.status != 200:
            body = r.read(65536)
            res.error = "HTTP %d: %s" % (r.status, body[:200].decode("utf-8", "replace"))
            return res
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line or line.startswith(b":") or not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            try:
                obj = json.loads(payload)
            except ValueError:
                res.error = "bad SSE data: %r" % payload[:200]
                return res
            if "error" in obj:
                res.error = "stream error: %s" % json.dumps(obj["error"])[:200]
                return res
            now = time.monotonic()
            if chunk_text(obj, chat):
                res.chunks += 1
                if t_first is None:
                    t_first = now
                t_last = now
            u = obj.get("usage")
            if isinstance(u, dict) and "completion_tokens" in u:
                usage_tokens = u["completion_tokens"]
                res.prompt_tokens = u.get("prompt_tokens")
        if not done:
            res.error = "stream ended without [DONE]"
            return res
    except (OSError, http.client.HTTPException, ValueError) as e:
        res.error = "%s: %s" % (type(e).__name__, e)
        return res
    finally:
        res.t_end = time.monotonic()
        c.close()
    res.ok = True
    res.tokens = usage_tokens if usage_tokens is not None else res.chunks
    if t_first is not None:
        res.ttft = t_first - res.t_start
        if t_sched is not None:
            res.ttft_sched = t_first - t_sched
        if res.chunks > 1:
            res.tpot = (t_last - t_first) / (res.chunks - 1)
    return res


def run_load(args, target, headers, log=None):
    """Run the configured load once; returns the summary dict."""
    prompts = PromptMaker(args, target, headers)
    results = []
    lock = threading.Lock()
    t0 = time.monotonic()
    deadline = t0 + args.duration if args.duration > 0 else None
    issued = [0]
    stop = threading.Event()

    def take_slot():
        with lock:
            if stop.is_set():
                return False
            if args.requests > 0 and issued[0] >= args.requests:
                return False
            if deadline is not None and time.monotonic() >= deadline:
                return False
            issued[0] += 1
            return True

    def record(res):
        with lock:
            results.append(res)
            n = len(results)
        if log and args.progress and n % args.progress == 0:
            log("%d requests done" % n)

    threads = []
    if args.rate is None:
        def client():
            while take_slot():
                record(one_request(args, target, headers, prompts.next()))
        for _ in range(args.clients):
            t = threading.Thread(target=client, daemon=True)
            t.start()
            threads.append(t)
    else:
        import queue
        q = queue.Queue()
        arr_rng = random.Random(args.seed + 1)

        def worker():
            while True:
                item = q.get()
                if item is None:
                    return
                record(one_request(args, target, headers, item[1], item[0]))

        for _ in range(args.clients):
            t = threading.Thread(target=worker, daemon=True)
            t.start()
            threads.append(t)
        t_next = time.monotonic()
        while take_slot():
            now = time.monotonic()
            if t_next > now:
                time.sleep(t_next - now)
            q.put((t_next, prompts.next()))
            t_next += arr_rng.expovariate(args.rate)
            if deadline is not None and t_next >= deadline:
                break
        for _ in threads:
            q.put(None)
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    except KeyboardInterrupt:
        stop.set()
        raise
    wall = time.monotonic() - t0
    return summarize(args, results, wall)


def summarize(args, results, wall):
    ok = [r for r in results if r.ok]
    errs = [r for r in results if not r.ok]
    ttft = [r.ttft for r in ok if r.ttft is not None]
    tpot = [r.tpot for r in ok if r.tpot is not None]
    tokens = sum(r.tokens for r in ok)
    by_kind = {}
    for r in errs:
        k = ("HTTP %d" % r.status) if r.status and r.status != 200 else r.error.split(":")[0]
        by_kind[k] = by_kind.get(k, 0) + 1
    s = {
        "endpoint": args.endpoint, "clients": args.clients,
        "rate": args.rate, "prompt_tokens": args.prompt_tokens,
        "max_tokens": args.max_tokens,
        "requests": len(results), "ok": len(ok), "errors": len(errs),
        "errors_by_kind": by_kind,
        "error_samples": [r.error for r in errs[:5]],
        "wall_s": wall, "output_tokens": tokens,
        "output_tokens_per_s": tokens / wall if wall > 0 else 0.0,
        "requests_per_s": len(ok) / wall if wall > 0 else 0.0,
        "ttft_p50_ms": percentile(ttft, 50) * 1e3,
        "ttft_p95_ms": percentile(ttft, 95) * 1e3,
        "tpot_p50_ms": percentile(tpot, 50) * 1e3,
        "tpot_p95_ms": percentile(tpot, 95) * 1e3,
        "tokens_per_request_mean": tokens / len(ok) if ok else 0.0,
        "short_requests": sum(1 for r in ok if r.tokens < args.max_tokens),
    }
    if args.rate is not None:
        ts = [r.ttft_sched for r in ok if r.ttft_sched is not None]
        qd = [r.queue_delay for r in ok]
        s["ttft_from_arrival_p50_ms"] = percentile(ts, 50) * 1e3
        s["ttft_from_arrival_p95_ms"] = percentile(ts, 95) * 1e3
        s["client_queue_p95_ms"] = percentile(qd, 95) * 1e3
    return s


ROWS = [
    ("requests", "requests", "%d"),
    ("ok", "ok", "%d"),
    ("errors", "errors", "%d"),
    ("output tokens", "output_tokens", "%d"),
    ("output tokens/s", "output_tokens_per_s", "%.1f"),
    ("requests/s", "requests_per_s", "%.2f"),
    ("TTFT p50 ms", "ttft_p50_ms", "%.1f"),
    ("TTFT p95 ms", "ttft_p95_ms", "%.1f"),
    ("TPOT p50 ms", "tpot_p50_ms", "%.2f"),
    ("TPOT p95 ms", "tpot_p95_ms", "%.2f"),
    ("tokens/request", "tokens_per_request_mean", "%.1f"),
    ("short requests", "short_requests", "%d"),
    ("wall s", "wall_s", "%.1f"),
]
OPEN_ROWS = [
    ("TTFT p50 from arrival ms", "ttft_from_arrival_p50_ms", "%.1f"),
    ("TTFT p95 from arrival ms", "ttft_from_arrival_p95_ms", "%.1f"),
    ("client queue p95 ms", "client_queue_p95_ms", "%.1f"),
]


def fmt(f, v):
    if isinstance(v, float) and math.isnan(v):
        return "-"
    return f % v


def print_table(named, out=sys.stdout, ratio=True):
    """Print one column per (name, summary); with two, a third column with
    the ratio first/second of each figure."""
    names = [n for n, _ in named]
    rows = list(ROWS)
    if any("ttft_from_arrival_p50_ms" in s for _, s in named):
        rows += OPEN_ROWS
    cols = names[:]
    if ratio and len(named) == 2:
        cols.append("%s/%s" % (names[0], names[1]))
    w0 = max(len(r[0]) for r in rows)
    ws = [max(12, len(c)) for c in cols]
    out.write("%-*s" % (w0, "") + "".join("  %*s" % (w, c) for w, c in zip(ws, cols)) + "\n")
    for label, key, f in rows:
        cells = [fmt(f, s.get(key, float("nan"))) for _, s in named]
        if ratio and len(named) == 2:
            a, b = named[0][1].get(key), named[1][1].get(key)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b and \
                    not (isinstance(a, float) and math.isnan(a)) and \
                    not (isinstance(b, float) and math.isnan(b)):
                cells.append("%.2f" % (a / b))
            else:
                cells.append("-")
        out.write("%-*s" % (w0, label) + "".join("  %*s" % (w, c) for w, c in zip(ws, cells)) + "\n")
    for n, s in named:
        if s["errors"]:
            out.write("%s errors: %s\n" % (n, json.dumps(s["errors_by_kind"])))
            for e in s["error_samples"]:
                out.write("  e.g. %s\n" % e)


# ---- starting and stopping a server ----

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    """A server process started from a shell command."""

    def __init__(self, cmd, url, log_path, wait_s, headers, log):
        self.port = free_port()
        self.cmd = cmd.replace("{port}", str(self.port))
        self.url = url.replace("{port}", str(self.port))
        self.log_path = log_path
        self.wait_s = wait_s
        self.headers = headers
        self.log = log
        self.proc = None
        self.logf = None

    def start(self):
        self.log("starting: %s" % self.cmd)
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, shell=True, stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        target = Target(self.url)
        t_end = time.monotonic() + self.wait_s
        while time.monotonic() < t_end:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with status %d before it was ready; see %s"
                                   % (self.proc.returncode, self.log_path))
            try:
                st, _ = simple_request(target, "GET", "/health", timeout=2)
                if st == 200:
                    return target
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("server not ready after %gs; see %s" % (self.wait_s, self.log_path))

    def stop(self, grace=30):
        """SIGTERM, then SIGKILL after grace seconds; returns the exit status."""
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            # The shell may have exec'd the server or may be its parent:
            # signal the whole process group it leads.
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                rc = self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.log("server did not stop in %ds; killing it" % grace)
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                rc = self.proc.wait()
        if self.logf:
            self.logf.close()
            self.logf = None
        self.proc = None
        return rc


def auth_headers(args):
    return {"Authorization": "Bearer " + args.api_key} if args.api_key else {}


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Streaming load test for OpenAI-compatible completion servers.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--url", default=None,
                   help="server base URL (default http://127.0.0.1:8080, or "
                        "http://127.0.0.1:{port} with --server-cmd/--compare)")
    p.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    p.add_argument("-c", "--clients", type=int, default=8, help="concurrent clients (default 8)")
    p.add_argument("-n", "--requests", type=int, default=0,
                   help="stop after this many requests (0: no limit; default: 4 per client "
                        "when --duration is not given)")
    p.add_argument("-d", "--duration", type=float, default=0,
                   help="stop sending after this many seconds (0: no limit)")
    p.add_argument("--rate", type=float, default=None,
                   help="open loop: Poisson arrivals at this many requests/s")
    p.add_argument("-p", "--prompt-tokens", type=int, default=128)
    p.add_argument("-g", "--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--ban", type=id_range, action="append", default=[], metavar="A-B",
                   help="also ban token ids A to B with logit_bias -100 (repeatable); e.g. a "
                        "SentencePiece vocabulary's byte tokens 3-258, whose partial UTF-8 some "
                        "servers' output parsers refuse")
    p.add_argument("--seed", type=int, default=1234, help="seed of the prompt generator")
    p.add_argument("--id-min", type=int, default=100, help="smallest random prompt token id")
    p.add_argument("--id-max", type=int, default=500,
                   help="random prompt token ids are below this (default 500, which "
                        "any vocabulary of 512 or more holds)")
    p.add_argument("--eos-id", type=int, default=None,
                   help="also ban this token id with logit_bias -100")
    p.add_argument("--no-ignore-eos", action="store_true", help="send ignore_eos false")
    p.add_argument("--model", default="default", help="the request's model field")
    p.add_argument("--api-key", default=os.environ.get("LOADTEST_API_KEY"))
    p.add_argument("--timeout", type=float, default=600, help="per-request socket timeout, s")
    p.add_argument("--server-cmd", default=None, help="start this server command first")
    p.add_argument("--compare", action="append", default=[], metavar="NAME=CMD",
                   help="run the load against each server command in turn (repeatable)")
    p.add_argument("--rounds", type=int, default=1,
                   help="with --compare: rounds, alternating the order (medians reported)")
    p.add_argument("--server-wait", type=float, default=300,
                   help="seconds to wait for /health 200 (default 300)")
    p.add_argument("--server-log", default=None,
                   help="server output file (default: loadtest-NAME.log in $TMPDIR)")
    p.add_argument("--warmup", type=int, default=1,
                   help="requests sent one at a time before measuring (default 1)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="also write the results as JSON to FILE (default: stdout)")
    p.add_argument("--progress", type=int, default=0, help="log every N finished requests")
    p.add_argument("-q", "--quiet", action="store_true")
    a = p.parse_args(argv)
    if a.clients < 1:
        p.error("--clients must be >= 1")
    if a.prompt_tokens < 1 or a.max_tokens < 1:
        p.error("--prompt-tokens and --max-tokens must be >= 1")
    if a.rate is not None and a.rate <= 0:
        p.error("--rate must be > 0")
    if a.id_min < 0 or a.id_max <= a.id_min:
        p.error("need 0 <= --id-min < --id-max")
    if a.requests == 0 and a.duration == 0:
        a.requests = 4 * a.clients
    if a.server_cmd and a.compare:
        p.error("--server-cmd and --compare do not go together")
    for c in a.compare:
        if "=" not in c:
            p.error("--compare takes NAME=CMD")
    if a.url is None:
        a.url = ("http://127.0.0.1:{port}" if (a.server_cmd or a.compare)
                 else "http://127.0.0.1:8080")
    return a


def run_one(args, name, cmd, log):
    """One measured run, starting and stopping the server if cmd is set."""
    headers = auth_headers(args)
    server = None
    if cmd:
        lp = args.server_log or os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                             "loadtest-%s.log" % name)
        if args.server_log and args.compare:
            root, ext = os.path.splitext(args.server_log)
            lp = "%s-%s%s" % (root, name, ext)
        server = Server(cmd, args.url, lp, args.server_wait, headers, log)
        target = server.start()
    else:
        target = Target(args.url)
    try:
        wa = argparse.Namespace(**vars(args))
        wa.seed = args.seed + 7919  # warm-up prompts share no prefix with measured ones
        for _ in range(args.warmup):
            r = one_request(wa, target, headers, PromptMaker(wa, target, headers).next())
            if not r.ok:
                log("warm-up request failed: %s" % r.error)
        log("%s: %d clients, %s, prompt %d tokens, max_tokens %d" % (
            name, args.clients,
            "closed loop" if args.rate is None else "open loop %.2f req/s" % args.rate,
            args.prompt_tokens, args.max_tokens))
        s = run_load(args, target, headers, log)
    finally:
        if server:
            rc = server.stop()
            log("%s stopped, exit status %s" % (name, rc))
    s["name"] = name
    return s


def median_summary(runs):
    """Key-wise median of several summaries of one server."""
    if len(runs) == 1:
        return runs[0]
    out = dict(runs[0])
    for k, v in runs[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            vals = [r[k] for r in runs if isinstance(r.get(k), (int, float))]
            out[k] = percentile(vals, 50)
    for k in ("errors", "requests", "ok", "output_tokens"):
        out[k] = sum(r[k] for r in runs)
    out["rounds"] = len(runs)
    return out


def id_range(text):
    lo, sep, hi = text.partition("-")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) > int(hi):
        raise argparse.ArgumentTypeError(f"'{text}' is not a token id range A-B")
    return int(lo), int(hi)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log = (lambda m: None) if args.quiet else \
        (lambda m: sys.stderr.write("loadtest: %s\n" % m) or sys.stderr.flush())
    try:
        if args.compare:
            servers = [c.split("=", 1) for c in args.compare]
            runs = {n: [] for n, _ in servers}
            for rnd in range(args.rounds):
                order = servers if rnd % 2 == 0 else servers[::-1]
                for n, cmd in order:
                    runs[n].append(run_one(args, n, cmd, log))
            named = [(n, median_summary(runs[n])) for n, _ in servers]
        else:
            name = "server"
            named = [(name, run_one(args, name, args.server_cmd, log))]
    except (RuntimeError, OSError) as e:
        sys.stderr.write("loadtest: %s\n" % e)
        return 2
    except KeyboardInterrupt:
        return 130
    print_table(named)
    if args.json:
        doc = {"args": {k: v for k, v in vars(args).items() if k != "api_key"},
               "results": [s for _, s in named]}
        if len(named) == 2:
            a, b = named[0][1], named[1][1]
            doc["ratio"] = {k: (a[k] / b[k]) for k in ("output_tokens_per_s", "ttft_p50_ms",
                                                        "tpot_p50_ms")
                            if isinstance(b.get(k), float) and b[k] and not math.isnan(b[k])}
        text = json.dumps(doc, indent=2, allow_nan=True)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 1 if any(s["errors"] for _, s in named) else 0


if __name__ == "__main__":
    sys.exit(main())
