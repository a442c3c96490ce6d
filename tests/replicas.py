#!/usr/bin/env python3
# replicas.py -- dist/haproxy.cfg in front of two hearth serve instances,
# for tests/cli-replicas.sh.
#
# usage: replicas.py HAPROXY [HEARTH]
#
# Two instances of hearth serve (stories260K, chatml) and HAProxy with the
# recipe of dist/haproxy.cfg, its addresses replaced by loopback ports,
# then:
#   session    requests with an X-Session-Id header: each session's
#              requests are answered by one instance, and both instances
#              answer some sessions
#   affinity   multi-turn chats sharing one system prompt, without any
#              header: every turn of a conversation goes to the instance
#              of its first turn, whose prefix cache then holds all of the
#              previous turn; the prefix-cache hit rate is printed beside
#              the rate of the same chats with the recipe's balancing
#              replaced by round robin
#   failover   SIGTERM to one instance while a stream runs on it: the
#              stream ends normally, and every request sent meanwhile
#              (those that would go to it included) is answered 200 by the
#              other instance
#
# The server helpers come from server-api.py beside this script.  Exit
# status 1 if any check failed, 77 if the model is missing.
import importlib.util
import os
import re
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HAPROXY = sys.argv[1]
sys.argv = [sys.argv[0]] + sys.argv[2:]   # server-api.py reads HEARTH from argv[1]
spec = importlib.util.spec_from_file_location("server_api", os.path.join(HERE, "server-api.py"))
api = importlib.util.module_from_spec(spec)
spec.loader.exec_module(api)
check, need, say, short = api.check, api.need, api.say, api.short

RECIPE = os.path.join(os.path.dirname(HERE), "dist", "haproxy.cfg")
KV_BLOCK = 16
SYSTEM = "You are a storyteller who tells short stories about animals."
# an odd number, so that round robin over two instances alternates each
# conversation's turns between them
TOPICS = ["a cat", "a dog", "a fox", "an owl", "a bear"]
TURNS = 3
# HAProxy counts a request against its instance's load until it has
# closed the request's stream, which can be a moment after the client has
# read the whole response.  hash-balance-factor sends a request whose
# instance is above its share elsewhere, and with one request in flight
# that share is one: a request sent the instant the previous one was read
# could land on the other instance by that count alone.  The sequential
# requests below wait this long first, so that each finds no load.
SETTLE = 0.2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Front:
    """HAProxy with the recipe, its instances and port replaced; the
    balancing line replaced by `balance` when given."""

    def __init__(self, name, backends, balance=None):
        self.name, self.port = name, free_port()
        with open(RECIPE) as f:
            cfg = f.read()
        edits = [(r"(?m)^    bind :8080$", f"    bind 127.0.0.1:{self.port}"),
                 (r"(?m)^    log /dev/log local0\n", ""),
                 (r"(?m)^    server hearth1 127\.0\.0\.1:8081\n    server hearth2 127\.0\.0\.1:8082$",
                  "\n".join(f"    server {b.name} 127.0.0.1:{b.port}" for b in backends))]
        if balance:
            edits.append((r"(?m)^    balance hash var\(txn\.affinity\)$", f"    balance {balance}"))
        for pattern, repl in edits:
            cfg, n = re.subn(pattern, repl, cfg)
            need(n == 1, f"dist/haproxy.cfg has no line matching {pattern!r}")
        self.path = os.path.join(api.tempfile.gettempdir(), f"hearth-replicas-{os.getpid()}-{name}.cfg")
        with open(self.path, "w") as f:
            f.write(cfg)
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", self.path], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     preexec_fn=api.die_with_parent)
        self.out = []
        threading.Thread(target=self._read, daemon=True).start()
        done, _ = api.wait_for(lambda: (self._health() == 200, None), 30, 0.1)
        need(done, f"HAProxy ({name}) never answered /health 200: {self.log()}")

    def _read(self):
        for raw in self.proc.stdout:
            self.out.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _health(self):
        try:
            return api.request(self, "GET", "/health", timeout=2).status
        except OSError:
            return None

    def log(self):
        return " | ".join(self.out[-8:]) or "(no output)"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.unlink(self.path)


def post(front, path, body, headers=None):
    time.sleep(SETTLE)
    return api.post(front, path, body, headers=headers)


def chat(front, messages, headers=None, max_tokens=16):
    body = {"model": api.ALIAS, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    r = post(front, "/v1/chat/completions", body, headers=headers)
    need(r.status == 200 and isinstance(r.json, dict), f"chat through {front.name}: {r}")
    return r.header("x-served-by"), r.json


def conversations(front, tag):
    """TOPICS chats of TURNS turns, the turns of all chats interleaved, tag
    in their first question (chats of another tag share only the system
    prompt with them); gives {topic: [(served_by, prompt_tokens,
    cached_tokens), ...]}."""
    talks = {t: [{"role": "system", "content": SYSTEM}] for t in TOPICS}
    seen = {t: [] for t in TOPICS}
    for turn in range(TURNS):
        for t in TOPICS:
            talks[t].append({"role": "user", "content": f"Tell me about {t} ({tag})." if turn == 0 else "And then?"})
            served, j = chat(front, talks[t])
            talks[t].append({"role": "assistant", "content": j["choices"][0]["message"]["content"]})
            u = j["usage"]
            seen[t].append((served, u["prompt_tokens"], u.get("prompt_tokens_details", {}).get("cached_tokens", 0)))
    return seen


def hit_rate(seen):
    later = [x for turns in seen.values() for x in turns[1:]]
    return sum(c for _, _, c in later) / max(1, sum(p for _, p, _ in later))


def main():
    if not os.path.exists(api.MODEL):
        print(f"SKIP: {api.MODEL} is missing", file=sys.stderr)
        return 77
    dog = threading.Timer(api.WALL_LIMIT, api.watchdog)
    dog.daemon = True
    dog.start()
    fronts = []
    args = ("-c", "2048", "-np", "4", "--kv-block", str(KV_BLOCK), "--grace", "20")
    try:
        a, b = api.Server("hearth-a", *args), api.Server("hearth-b", *args)
        a.wait_ready()
        b.wait_ready()
        front = Front("hash", [a, b])
        fronts.append(front)

        api.section_name = "session"
        by = {}
        for i in range(8):
            for _ in range(2):
                r = post(front, "/v1/completions", {"model": api.ALIAS, "prompt": f"Once upon a time {i}",
                                                         "max_tokens": 4, "temperature": 0},
                             headers={"X-Session-Id": f"session-{i}"})
                need(r.status == 200, f"completion through HAProxy: {r}")
                by.setdefault(i, set()).add(r.header("x-served-by"))
        check(all(len(s) == 1 for s in by.values()), "each session's requests go to one instance",
              f"{by}; HAProxy: {front.log()}")
        check({x for s in by.values() for x in s} == {a.name, b.name}, "both instances serve sessions", by)

        api.section_name = "affinity"
        seen = conversations(front, "affinity")
        check(all(len({s for s, _, _ in turns}) == 1 for turns in seen.values()),
              "every turn of a conversation goes to the instance of its first turn", seen)
        check({turns[0][0] for turns in seen.values()} == {a.name, b.name},
              "the conversations are spread over both instances", seen)
        # each later turn finds the whole previous turn (its prompt and
        # reply) cached, up to the last partial block
        short_hits = [(t, turns) for t, turns in seen.items()
                      if any(turns[k][2] < turns[k - 1][1] - KV_BLOCK for k in range(1, TURNS))]
        check(not short_hits, "each later turn is a prefix-cache hit over the previous turn", short_hits)
        rate = hit_rate(seen)
        front.stop()
        fronts.remove(front)
        rr = Front("roundrobin", [a, b], balance="roundrobin")
        fronts.append(rr)
        rr_rate = hit_rate(conversations(rr, "round robin"))
        say(f"prefix-cache hit rate of turns 2 to {TURNS}: {rate:.1%} with affinity, "
            f"{rr_rate:.1%} with round robin")
        check(rate > rr_rate, "affinity hits the prefix cache more often than round robin",
              f"{rate:.3f} against {rr_rate:.3f}")
        rr.stop()
        fronts.remove(rr)

        api.section_name = "failover"
        front = Front("failover", [a, b])
        fronts.append(front)
        # a stream on a, by a session key that hashes to a
        key = next((f"s{i}" for i in range(64)
                    if post(front, "/v1/completions", {"model": api.ALIAS, "prompt": "Hi", "max_tokens": 1},
                                headers={"X-Session-Id": f"s{i}"}).header("x-served-by") == a.name), None)
        need(key is not None, "no session key of 64 goes to the first instance")
        time.sleep(SETTLE)
        stream = api.Raw(front, "/v1/completions", {"model": api.ALIAS, "prompt": "Once upon a time",
                                                    "max_tokens": 600, "stream": True,
                                                    "logit_bias": api.NO_EOS},
                         headers={"X-Session-Id": key})
        need(stream.read_head() == 200 and stream.headers.get("x-served-by") == a.name,
             f"the stream on {a.name} starts")
        a.proc.send_signal(api.signal.SIGTERM)
        served, statuses = [], []
        for i in range(8):
            r = post(front, "/v1/completions", {"model": api.ALIAS, "prompt": f"Hello {i}", "max_tokens": 4},
                         headers={"X-Session-Id": key if i % 2 == 0 else f"other-{i}"})
            statuses.append(r.status)
            served.append(r.header("x-served-by"))
        check(statuses == [200] * 8 and set(served) == {b.name},
              f"while {a.name} drains, every request is answered by {b.name}", f"{statuses} {served}")
        body = stream.body()
        stream.close()
        check(body.rstrip().endswith(b"data: [DONE]"), f"the stream on {a.name} ends normally",
              short(body[-200:]))
        check(a.proc.wait(timeout=60) == 0, f"{a.name} exits 0 after its drain")
    except api.Abort as e:
        api.fail(str(e))
    except Exception:
        api.fail("the test itself failed:\n" + api.traceback.format_exc())
    finally:
        for f in fronts:
            f.stop()
        api.kill_all()
        dog.cancel()
    for f in api.failures:
        say(f"FAILED: {f}")
    return 1 if api.failures else 0


if __name__ == "__main__":
    sys.exit(main())
