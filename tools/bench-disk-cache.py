#!/usr/bin/env python3
"""bench-disk-cache.py -- time to first token of hearth serve with a long
system prompt: a miss (computed), a hit in the pool, and a hit on disk
after a restart (hearth serve --cache-dir).

Usage: tools/bench-disk-cache.py HEARTH MODEL CACHE_DIR [ROUNDS]

Each round empties CACHE_DIR, starts a server (2048 positions, 2 threads,
the chatml template), warms it with an unrelated short request (the
weights paged in, the threads started: a new process's first-request
costs), then sends the long system prompt with one question (a miss) and
with another (a hit in the pool: the system prompt's full blocks are
found, the rest computed); stops it (the blocks are written), starts a
new server on CACHE_DIR, warms it the same way and sends the system
prompt with a third question (its blocks read from disk).  Prints each
request's TTFT from the response's hearth.timings, its prompt tokens,
cached tokens and tokens read from disk.
"""
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

if len(sys.argv) < 4:
    sys.exit(__doc__)
hearth, model, cache = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
system = " ".join(f"Rule {i}: answer politely, cite the manual section {i}, and never reveal the configuration."
                  for i in range(1, 16))
procs = []
atexit.register(lambda: [p.kill() for p in procs if p.poll() is None])


def start():
    p = subprocess.Popen([hearth, "serve", "-m", model, "-c", "2048", "-t", "2", "--port", "0", "--chat-template",
                          "chatml", "--cache-dir", cache], stderr=subprocess.PIPE, text=True)
    procs.append(p)
    port = None
    for line in p.stderr:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = m.group(1)
        if "ready:" in line:
            break
    if port is None or p.poll() is not None:
        sys.exit("the server did not start")
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p, port


def ask(port, question, system_text=None):
    body = json.dumps({"messages": [{"role": "system", "content": system_text or system},
                                    {"role": "user", "content": question}],
                       "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    try:
        r = json.load(urllib.request.urlopen(req, timeout=600))
    except urllib.error.HTTPError as e:
        sys.exit(e.read().decode())
    u = r["usage"]
    d = u["prompt_tokens_details"]
    return r["hearth"]["timings"][0]["ttft_ms"], u["prompt_tokens"], d["cached_tokens"], d["hearth_disk_cached_tokens"]


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait()


print("| round | request | TTFT ms | prompt tokens | cached | from disk |")
print("|---:|---|---:|---:|---:|---:|")
for rnd in range(rounds):
    subprocess.run(["rm", "-rf", cache], check=True)
    p, port = start()
    ask(port, "warm-up", "Say hi.")
    rows = [("miss", ask(port, f"Question {rnd}a: what is rule 7?")),
            ("pool hit", ask(port, f"Question {rnd}b: what is rule 9?"))]
    stop(p)
    p, port = start()
    ask(port, "warm-up", "Say hi.")
    rows.append(("disk hit after a restart", ask(port, f"Question {rnd}c: what is rule 11?")))
    stop(p)
    for name, (ttft, prompt, cached, disk) in rows:
        print(f"| {rnd} | {name} | {ttft:.1f} | {prompt} | {cached} | {disk} |", flush=True)
files = [f for f in os.listdir(cache) if f.endswith(".kvb")]
print(f"\n{len(files)} block files, {sum(os.path.getsize(os.path.join(cache, f)) for f in files)} bytes; "
      f"load average {os.getloadavg()[0]:.1f}")
