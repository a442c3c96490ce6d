#!/usr/bin/env python3
# server-models.py -- hearth serve's model table end to end, for
# tests/server-models.sh.
#
# usage: server-models.py HEARTH DATA WORKDIR [GEN_MODEL]
#
# WORKDIR/models gets stories260K and micro-llama (Q8_0) from
# DATA/models, a file that only looks like GGUF, a file that is not
# *.gguf, and (with GEN_MODEL, tools/gen-model) a model split in parts
# (its twin in one file outside the directory).
# Servers are started on 127.0.0.1 with --port 0:
#
#   story, llama, whole   each model alone (-m FILE): the texts every
#                  other server must give for the same requests and seeds
#   dir            --models-dir, --keep-alive -1: the list, loading on
#                  first use, unknown and missing names, the broken file,
#                  requests to both models at once, /tokenize, /metrics
#                  and the access log
#   idle           -m ALIAS=FILE twice, --keep-alive 0: a model is
#                  unloaded once its request has ended, loaded again by
#                  the next
#   tight          --max-memory that holds one model at a time: requests
#                  alternating between the models, and at once, each get
#                  their text while the least recently used model makes
#                  room
#   small          --max-memory below every model: 400 model_too_large
#
# and the flags' usage errors are checked.  Each failed check prints a
# line starting "FAIL:"; the exit status is 1 if any failed.

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HEARTH, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
GEN = sys.argv[4] if len(sys.argv) > 4 else ""
FLAGS = ["-t", "1", "-c", "256", "-np", "2", "--chat-template", "chatml"]
TIMEOUT = 60.0
failures = 0


def fail(desc):
    global failures
    failures += 1
    print(f"FAIL: {desc}", flush=True)


def check(cond, desc, detail=""):
    if cond:
        print(f"PASS: {desc}", flush=True)
    else:
        fail(f"{desc}{': ' + detail if detail else ''}")
    return cond


class Server:
    def __init__(self, name, args):
        self.name = name
        self.err_path = os.path.join(WORK, name + ".err")
        self.err = open(self.err_path, "w+b")
        self.proc = subprocess.Popen([HEARTH, "serve", "--host", "127.0.0.1", "--port", "0"] + FLAGS + args,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err)
        self.port = None
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end and self.proc.poll() is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        if not self.port:
            raise RuntimeError(f"{name}: no 'listening on' line: {self.log()[-2000:]}")
        while time.monotonic() < end:
            if self.get("/health")[0] == 200:
                return
            time.sleep(0.05)
        raise RuntimeError(f"{name}: /health never said ok: {self.log()[-2000:]}")

    def log(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def request(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = c.getresponse()
            raw = r.read()
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = raw.decode("utf-8", "replace")
            return r.status, obj
        finally:
            c.close()

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body):
        return self.request("POST", path, body)

    def models(self):
        st, o = self.get("/v1/models")
        return {m["id"]: m for m in o["data"]} if st == 200 else {}

    def metric(self, line_start):
        st, text = self.get("/metrics")
        for line in text.splitlines() if st == 200 else []:
            if line.startswith(line_start + " "):
                return float(line.split()[-1])
        return None

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        check(rc == 0, f"{self.name}: exit status 0 after SIGTERM", f"status {rc}: {self.log()[-1500:]}")
        log = self.log()
        check(not re.search(r"AddressSanitizer|runtime error:|LeakSanitizer", log), f"{self.name}: no sanitizer report",
              log[-3000:])
        self.err.close()


PROMPTS = {"story": "Once upon a time", "llama": "The quick brown fox"}


def completion(srv, model, seed=7, prompt=None, max_tokens=24):
    body = {"prompt": prompt or PROMPTS.get(model, "Hello"), "max_tokens": max_tokens, "temperature": 0.9,
            "seed": seed}
    if model is not None:
        body["model"] = model
    st, o = srv.post("/v1/completions", body)
    if st != 200:
        return st, o
    return st, o["choices"][0]["text"]


def wait_for(cond, seconds=20.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def at_once(srv, ref, what):
    """Two requests to each model at once: each gives its text alone."""
    results = {}

    def worker(model, seed):
        results[(model, seed)] = completion(srv, model, seed)

    threads = [threading.Thread(target=worker, args=(m, s)) for m in ("story", "llama") for s in (7, 8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k, (st, t) in sorted(results.items()):
        check(st == 200 and t == ref[k], f"{what}: {k[0]} seed {k[1]} gives its text alone", f"{st} {t!r}")


def main():
    mdir = os.path.join(WORK, "models")
    os.makedirs(mdir, exist_ok=True)
    story_file = os.path.join(DATA, "models", "stories260K.gguf")
    llama_file = os.path.join(DATA, "models", "micro-llama-Q8_0.gguf")
    shutil.copy(story_file, os.path.join(mdir, "story.gguf"))
    shutil.copy(llama_file, os.path.join(mdir, "llama.gguf"))
    with open(os.path.join(mdir, "broken.gguf"), "wb") as f:
        f.write(b"GGUF\x03\x00\x00\x00" + b"\xff" * 200)
    with open(os.path.join(mdir, "notes.txt"), "w") as f:
        f.write("not a model\n")
    split = False
    if GEN:
        # the same random model whole (outside the directory) and in parts
        gen = [GEN, "--threads", "1", "--shape", "micro-qwen3", "--type", "Q8_0"]
        r1 = subprocess.run(gen + [os.path.join(WORK, "whole.gguf")], capture_output=True)
        r2 = subprocess.run(gen + ["--split-max-tensors", "8", os.path.join(mdir, "parts.gguf")], capture_output=True)
        split = r1.returncode == 0 and r2.returncode == 0 and \
            any(n.startswith("parts-00001-of-") for n in os.listdir(mdir)) and \
            sum(n.startswith("parts-0000") for n in os.listdir(mdir)) > 1
        check(split, "gen-model wrote a model whole and in parts",
              (r1.stderr + r2.stderr).decode("utf-8", "replace")[-500:])

    # ---- usage errors ----
    def usage(args, desc, text):
        p = subprocess.run([HEARTH, "serve", "--port", "0"] + args, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=TIMEOUT)
        err = p.stderr.decode("utf-8", "replace")
        check(p.returncode == 2 and text in err and "listening" not in err, f"usage error: {desc}",
              f"status {p.returncode}: {err[-600:]}")

    usage(["--models-dir", os.path.join(WORK, "nowhere")], "--models-dir that does not exist", "--models-dir")
    usage(["-m", "a=" + story_file, "-m", "a=" + llama_file], "two models named alike", "two models are named 'a'")
    usage(["-m", "a=" + os.path.join(WORK, "none.gguf"), "-m", "b=" + llama_file], "-m ALIAS=FILE of no file",
          "no such file")
    usage(["--models-dir", mdir, "--keep-alive", "soon"], "--keep-alive soon", "--keep-alive")
    usage(["--models-dir", mdir, "--max-memory", "5X"], "--max-memory 5X", "--max-memory")
    usage(["--models-dir", mdir, "--alias", "x"], "--alias with a table", "--alias")
    empty = os.path.join(WORK, "empty")
    os.makedirs(empty, exist_ok=True)
    usage(["--models-dir", empty], "--models-dir without models", "no *.gguf")

    # ---- the reference texts: each model alone ----
    ref = {}
    story1 = Server("story", ["-m", os.path.join(mdir, "story.gguf")])
    for seed in (7, 8):
        st, ref[("story", seed)] = completion(story1, "story", seed)
        check(st == 200, f"story alone: seed {seed}", str(ref[("story", seed)]))
    # one model: any name is that model, as before the table
    st, t = completion(story1, "gpt-4o-mini", 7, PROMPTS["story"])
    check(st == 200 and t == ref[("story", 7)], "one model: another name is served by it", f"{st} {t}")
    st, t = completion(story1, None, 7, PROMPTS["story"])
    check(st == 200 and t == ref[("story", 7)], "one model: no name is served by it", f"{st} {t}")
    ms = story1.models()
    check(list(ms) == ["story"] and ms["story"].get("hearth", {}).get("loaded") is True and "meta" in ms["story"],
          "one model: /v1/models lists it loaded", str(ms))
    st, ref[("story", "long")] = completion(story1, "story", 9, max_tokens=200)
    check(st == 200, "story alone: a long reply", str(ref[("story", "long")]))
    st, tok_story = story1.post("/tokenize", {"content": "Once upon a time"})
    story1.stop()
    llama1 = Server("llama", ["-m", os.path.join(mdir, "llama.gguf")])
    for seed in (7, 8):
        st, ref[("llama", seed)] = completion(llama1, "llama", seed)
        check(st == 200, f"llama alone: seed {seed}", str(ref[("llama", seed)]))
    st, tok_llama = llama1.post("/tokenize", {"content": "Once upon a time"})
    llama1.stop()
    if split:
        whole = Server("whole", ["-m", os.path.join(WORK, "whole.gguf")])
        st, ref[("parts", 7)] = completion(whole, "parts", 7, "Hi")
        check(st == 200, "the split model's twin alone", str(ref[("parts", 7)]))
        whole.stop()

    # ---- a directory of models ----
    d = Server("dir", ["--models-dir", mdir, "--keep-alive", "-1"])
    ms = d.models()
    want = ["broken", "llama"] + (["parts"] if split else []) + ["story"]
    check(sorted(ms) == want, "/v1/models lists every *.gguf once (a split model by its first part)", str(list(ms)))
    check(all(m.get("hearth", {}).get("loaded") is False and m.get("object") == "model" for m in ms.values()),
          "none is loaded before a request names it", str(ms))
    st, t = completion(d, "story", 7)
    check(st == 200 and t == ref[("story", 7)], "story: the text it gives alone", f"{st} {t!r} vs {ref[('story', 7)]!r}")
    ms = d.models()
    check(ms["story"]["hearth"]["loaded"] is True and ms["llama"]["hearth"]["loaded"] is False and "meta" in ms["story"],
          "story is loaded, llama is not", str({k: v["hearth"] for k, v in ms.items()}))
    st, t = completion(d, "llama", 7)
    check(st == 200 and t == ref[("llama", 7)], "llama: the text it gives alone", f"{st} {t!r} vs {ref[('llama', 7)]!r}")
    st, o = d.post("/v1/chat/completions", {"model": "story", "messages": [{"role": "user", "content": "Hi"}],
                                             "max_tokens": 8, "seed": 3})
    check(st == 200 and o.get("model") == "story", "a chat request names its model in the response", str(o)[:300])
    st, o = completion(d, "nope", 7, "Hi")
    check(st == 404 and o["error"]["code"] == "model_not_found" and o["error"]["param"] == "model"
          and "nope" in o["error"]["message"], "an unknown model: 404 model_not_found", str(o))
    st, o = completion(d, None, 7, "Hi")
    check(st == 400 and o["error"]["param"] == "model" and "story" in o["error"]["message"],
          "no model named among several: 400 naming them", str(o))
    st, o = d.post("/v1/completions", {"model": 5, "prompt": "Hi"})
    check(st == 400 and o["error"]["param"] == "model", "a model that is not a string: 400", str(o))
    st, o = completion(d, "broken", 7, "Hi")
    check(st == 500 and o["error"]["code"] == "model_load_failed" and "broken" in o["error"]["message"],
          "a broken file: 500 model_load_failed naming it", str(o))
    # requests that wait for the same failed load all fail with its error
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(completion(d, "broken", 7, "Hi"))) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    check(len(answers) == 3 and all(st == 500 and o["error"]["code"] == "model_load_failed" for st, o in answers),
          "three requests for the broken file at once: each a 500 model_load_failed", str(answers)[:500])
    ms = d.models()
    check(ms["broken"]["hearth"]["loaded"] is False and "error" in ms["broken"]["hearth"],
          "/v1/models shows the broken file's error", str(ms["broken"]))
    st, t = completion(d, "story", 8)
    check(st == 200 and t == ref[("story", 8)], "the others still work after it", f"{st} {t}")
    if split:
        st, t = completion(d, "parts", 7, "Hi")
        check(st == 200 and t == ref[("parts", 7)], "the split model gives the text of its whole twin", f"{st} {t}")
    st, o = d.post("/tokenize", {"content": "Once upon a time", "model": "llama"})
    check(st == 200 and o == tok_llama, "/tokenize with the model's vocabulary", f"{o} vs {tok_llama}")
    st, o = d.post("/tokenize", {"content": "Once upon a time", "model": "story"})
    check(st == 200 and o == tok_story, "/tokenize with the other's", f"{o} vs {tok_story}")

    # both models at once, two requests each
    at_once(d, ref, "at once")

    loaded = d.metric("hearth_models_loaded")
    check(loaded == (3 if split else 2), "/metrics: hearth_models_loaded", str(loaded))
    check(d.metric('hearth_model_loads_total{model="story"}') == 1, "/metrics: story loaded once")
    check((d.metric('hearth_model_load_failures_total{model="broken"}') or 0) >= 1, "/metrics: the failed load")
    check((d.metric('hearth_model_load_seconds_total{model="llama"}') or -1) >= 0, "/metrics: load seconds")
    check(d.metric("hearth_generated_tokens_total") is not None and d.metric("hearth_generated_tokens_total") > 0,
          "/metrics: the engines' counters")
    log = d.log()
    check(re.search(r"model story: loaded in [0-9.]+ s", log) is not None, "the log says when a model loaded",
          log[-1500:])
    check(re.search(r"req-\d+ POST /v1/completions 200 .* model=llama", log) is not None,
          "the access log names the model", log[-1500:])
    check("model broken: the load failed" in log, "the log says why a load failed", log[-1500:])
    mem = {k: v["hearth"]["memory_bytes"] for k, v in d.models().items()}
    d.stop()

    # ---- idle models unloaded: --keep-alive 0 ----
    idle = Server("idle", ["-m", "story=" + os.path.join(mdir, "story.gguf"),
                           "-m", "llama=" + os.path.join(mdir, "llama.gguf"), "--keep-alive", "0"])
    st, t = completion(idle, "story", 7)
    check(st == 200 and t == ref[("story", 7)], "keep-alive 0: the text", f"{st} {t}")
    check(wait_for(lambda: idle.models()["story"]["hearth"]["loaded"] is False),
          "keep-alive 0: the model is unloaded after its request", str(idle.models()))
    check(wait_for(lambda: idle.metric('hearth_model_unloads_total{model="story",reason="idle"}') == 1),
          "/metrics counts the idle unload")
    st, t = completion(idle, "story", 8)
    check(st == 200 and t == ref[("story", 8)], "keep-alive 0: loaded again by the next request", f"{st} {t}")
    check(idle.metric('hearth_model_loads_total{model="story"}') == 2, "/metrics: two loads")
    check(re.search(r"model story: unloaded \(idle\)", idle.log()) is not None, "the log says why it was unloaded")
    idle.stop()

    # ---- memory for one model at a time ----
    one = max(mem["story"], mem["llama"])
    check(one < mem["story"] + mem["llama"], "the measured sizes", str(mem))
    tight = Server("tight", ["-m", "story=" + os.path.join(mdir, "story.gguf"),
                             "-m", "llama=" + os.path.join(mdir, "llama.gguf"), "--keep-alive", "-1",
                             "--max-memory", str(one + 4096)])
    order = ["story", "llama", "story", "llama", "story"]
    for i, m in enumerate(order):
        st, t = completion(tight, m, 7)
        check(st == 200 and t == ref[(m, 7)], f"one at a time: request {i + 1} ({m})", f"{st} {t}")
        ms = tight.models()
        others = [k for k, v in ms.items() if v["hearth"]["loaded"] and k != m]
        # a model's first load is estimated by its file: the other may be
        # unloaded only once the measure is known, right after
        check(wait_for(lambda: [k for k, v in tight.models().items() if v["hearth"]["loaded"]] == [m]),
              f"one at a time: only {m} is loaded after request {i + 1}", str(others))
    unloads = sum(tight.metric(f'hearth_model_unloads_total{{model="{m}",reason="memory"}}') or 0
                  for m in ("story", "llama"))
    check(unloads >= len(order) - 1, "/metrics counts the unloads for memory", str(unloads))
    check(re.search(r"model \w+: unloaded \(memory", tight.log()) is not None, "the log says it made room")
    at_once(tight, ref, "one at a time, at once")
    # a model with a request running is not unloaded for another: the
    # long reply is whole, and the other waits for it
    long_answer = []
    th = threading.Thread(target=lambda: long_answer.append(completion(tight, "story", 9, max_tokens=200)))
    th.start()
    wait_for(lambda: tight.models()["story"]["hearth"]["requests"] > 0, 10)
    st, t = completion(tight, "llama", 8)
    th.join()
    check(st == 200 and t == ref[("llama", 8)], "one at a time: the other model after a long reply", f"{st} {t}")
    check(long_answer and long_answer[0] == (200, ref[("story", "long")]),
          "one at a time: the long reply is whole (its model stayed)", str(long_answer)[:300])
    tight.stop()

    # ---- a bound no model fits ----
    small = Server("small", ["-m", "story=" + os.path.join(mdir, "story.gguf"),
                             "-m", "llama=" + os.path.join(mdir, "llama.gguf"), "--max-memory", "100K"])
    st, o = completion(small, "story", 7)
    check(st == 400 and o["error"]["code"] == "model_too_large" and o["error"]["param"] == "model"
          and "--max-memory" in o["error"]["message"] and "MiB" in o["error"]["message"],
          "a model larger than --max-memory: 400 model_too_large naming the sizes", str(o))
    small.stop()


try:
    main()
except Exception as e:  # a server that did not start, a connection refused
    import traceback
    traceback.print_exc()
    fail(f"the test stopped: {e}")
print(f"{failures} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
