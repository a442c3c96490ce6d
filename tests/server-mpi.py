#!/usr/bin/env python3
"""server-mpi.py -- the client of tests/server-mpi.sh (hearth serve --pp).

  server-mpi.py answers PORT OUT
      greedy completions with logprobs, whole and streamed, and four of
      other prompts at once (a pipeline's steps in flight): their text,
      log probabilities and finish reasons (not their ids or times) to OUT
  server-mpi.py kill PORT PIDFILE [RANK [SIGNAL]]
      two long streamed completions at once (on a pipeline, in groups of
      steps in flight); once both have text, SIGKILL (or SIGNAL: KILL or
      STOP) to the pid in PIDFILE, rank RANK (default 1): each stream must
      end with an error event naming the pipeline and that rank, then
      /health answers 503 naming it and a new request 503 pipeline_failed
  server-mpi.py drain PORT PIDFILE OUT
      a streamed completion; at its first text, SIGTERM to the pid in
      PIDFILE (rank 0): the stream must still end whole; its chunks to OUT

Exits 1 naming the first check that failed.
"""
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

PROMPT = "Once upon a time, there was a little"


def base(port):
    return "http://127.0.0.1:" + port


def wait_ready(port):
    for _ in range(600):
        try:
            with urllib.request.urlopen(base(port) + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    sys.exit("the server never answered /health with 200")


def post(port, path, body):
    return urllib.request.Request(base(port) + path, data=json.dumps(body).encode(), method="POST",
                                  headers={"Content-Type": "application/json"})


def completion(port, **extra):
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 40, "temperature": 0, "logprobs": 3}
    body.update(extra)
    with urllib.request.urlopen(post(port, "/v1/completions", body), timeout=120) as r:
        return json.load(r)


def events(resp):
    """The data of each server-sent event, parsed; "[DONE]" as is."""
    for line in resp:
        line = line.decode().rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        yield data if data == "[DONE]" else json.loads(data)


def chunk_of(ev):
    c = ev["choices"][0]
    return [c.get("text"), c.get("logprobs"), c.get("finish_reason")]


def answers(port, out):
    wait_ready(port)
    got = []
    r = completion(port)
    c = r["choices"][0]
    got.append(["whole", c["text"], c["logprobs"], c["finish_reason"]])
    # a longer one, past the first blocks of the cache
    r = completion(port, max_tokens=200, ignore_eos=True)
    c = r["choices"][0]
    got.append(["long", c["text"], c["logprobs"], c["finish_reason"]])
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 40, "temperature": 0, "logprobs": 3, "stream": True}
    with urllib.request.urlopen(post(port, "/v1/completions", body), timeout=120) as resp:
        got.append(["stream"] + [chunk_of(ev) if ev != "[DONE]" else ev for ev in events(resp)])
    # four at once, each its own prompt: the steps of the pipeline's
    # groups in flight together
    together = [None] * 4

    def one(i):
        try:
            r = completion(port, prompt=PROMPT + " " + ["girl", "dog", "boy named", "bird who"][i],
                           max_tokens=30 + 5 * i, ignore_eos=True)
            c = r["choices"][0]
            together[i] = ["together %d" % i, c["text"], c["logprobs"], c["finish_reason"]]
        except (urllib.error.URLError, OSError) as e:
            together[i] = ["together %d failed" % i, str(e)]
    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got += together
    with open(out, "w") as f:
        json.dump(got, f, sort_keys=True)


def kill(port, pidfile, rank="1", sig="KILL"):
    wait_ready(port)
    pid = int(open(pidfile).read())
    signo = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP}[sig]
    name = "rank " + rank
    # the rank's number, not a longer one that begins with it
    named = lambda text: re.search(r"\b%s\b" % name, text) is not None
    # two streams at once (on a pipeline, in groups of steps in flight)
    texted = [threading.Event(), threading.Event()]
    killed = threading.Event()
    result = [None, None]

    def stream(i):
        body = {"model": "m", "prompt": PROMPT + ["", " dog"][i], "max_tokens": 2000, "ignore_eos": True,
                "temperature": 0, "stream": True}
        error = None
        try:
            with urllib.request.urlopen(post(port, "/v1/completions", body), timeout=300) as resp:
                for ev in events(resp):
                    if ev == "[DONE]":
                        break
                    if "error" in ev:
                        error = ev["error"]
                        continue
                    if ev["choices"][0].get("text"):
                        texted[i].set()
                    if ev["choices"][0].get("finish_reason"):
                        result[i] = "stream %d ended with finish_reason %r, not an error" % (
                            i, ev["choices"][0]["finish_reason"])
                        return
        except (urllib.error.URLError, OSError) as e:
            result[i] = "stream %d: %s" % (i, e)
            return
        if not killed.is_set():
            result[i] = "stream %d ended before %s was signalled" % (i, name)
        elif not error:
            result[i] = "stream %d ended without an error event" % i
        elif error.get("code") != "pipeline_failed" or not named(error.get("message", "")):
            result[i] = "stream %d's error does not name the pipeline and %s: %r" % (i, name, error)
        else:
            result[i] = error

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for ev in texted:
        if not ev.wait(120):
            sys.exit("a stream had no text")
    killed.set()
    os.kill(pid, signo)
    for t in threads:
        t.join()
    for r in result:
        if not isinstance(r, dict):
            sys.exit(r or "a stream gave nothing")
    print("stream errors: %s | %s" % (result[0]["message"], result[1]["message"]))
    try:
        urllib.request.urlopen(base(port) + "/health", timeout=30)
        sys.exit("/health answers 200 after %s failed" % name)
    except urllib.error.HTTPError as e:
        h = json.load(e)
        if e.code != 503 or h.get("status") != "error" or not named(h.get("error", "")):
            sys.exit("/health after %s failed: %d %r" % (name, e.code, h))
        print("/health: %d %s" % (e.code, json.dumps(h)))
    try:
        completion(port)
        sys.exit("a new request is served after %s failed" % name)
    except urllib.error.HTTPError as e:
        err = json.load(e).get("error", {})
        if e.code != 503 or err.get("code") != "pipeline_failed":
            sys.exit("a new request after %s failed: %d %r" % (name, e.code, err))
        print("new request: %d %s" % (e.code, err["code"]))


def drain(port, pidfile, out):
    wait_ready(port)
    pid = int(open(pidfile).read())
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 200, "ignore_eos": True, "temperature": 0,
            "logprobs": 3, "stream": True}
    got = []
    sent = False
    with urllib.request.urlopen(post(port, "/v1/completions", body), timeout=120) as resp:
        for ev in events(resp):
            if ev != "[DONE]" and "error" in ev:
                sys.exit("the stream failed during the drain: %r" % ev["error"])
            if not sent and ev != "[DONE]" and ev["choices"][0].get("text"):
                os.kill(pid, signal.SIGTERM)
                sent = True
            got.append(chunk_of(ev) if ev != "[DONE]" else ev)
    with open(out, "w") as f:
        json.dump(got, f, sort_keys=True)


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "answers":
        answers(sys.argv[2], sys.argv[3])
    elif what == "kill":
        kill(*sys.argv[2:6])
    elif what == "drain":
        drain(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("unknown command " + what)
