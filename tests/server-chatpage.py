#!/usr/bin/env python3
# server-chatpage.py -- the chat page of hearth serve (GET /) in a real
# headless Chromium, driven through the DevTools protocol, for
# tests/server-chatpage.sh.
#
# usage: server-chatpage.py CHROMIUM SCREENSHOT.png
#
# Environment (from the shell script, which starts and stops the servers):
#   HEARTH_URL        a server started with --api-key KEY and --kv-block 16
#   HEARTH_KEY        its key
#   HEARTH_THINK_URL  a server whose template opens the reply's reasoning,
#                     with --reasoning-budget (no key)
#   HEARTH_ALIAS      the model's name on both
#   HEARTH_TABLE_URL  a server with two models (-m ALIAS=FILE twice), none
#                     loaded yet (no key)
#
# Chromium starts with --remote-debugging-port=0 and writes the port it
# got to DevToolsActivePort in its profile directory; this script speaks
# the protocol over a WebSocket client of its own (RFC 6455, the parts
# a client needs).  The page is used as a person would: keys typed into
# its fields, its buttons clicked with the mouse, Enter pressed.  What it
# shows is checked against what the server answers to the same requests
# made directly (non-streamed), so no expected text is written here.
#
# Prints "ok: ..." per check and "FAIL: ..." per failure; exit status 1
# if any check failed.  Every wait has a deadline, and the whole script
# an alarm, so a hung browser or server fails the test.

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

CHROMIUM, SHOT = sys.argv[1], sys.argv[2]
URL = os.environ["HEARTH_URL"].rstrip("/")
KEY = os.environ["HEARTH_KEY"]
THINK_URL = os.environ["HEARTH_THINK_URL"].rstrip("/")
ALIAS = os.environ["HEARTH_ALIAS"]
TABLE_URL = os.environ["HEARTH_TABLE_URL"].rstrip("/")
# The time limits guard against a hung browser or server, not a slow one:
# on two cores shared with a loaded build, Chromium took minutes to start
# and to answer its first commands.
WALL_LIMIT = 1200       # seconds, the whole script
WAIT = 300.0            # seconds, each wait for the page or the browser

SYSTEM = "You are a storyteller."
FIRST = "Tell me a story about a cat."
SECOND = "And then what did the cat do?"
LONG = "Tell me a very long story."
LONG_TOKENS = 15000     # the answer that is stopped: far longer than the wait for its first characters

failures = []


def ok(what):
    print(f"ok: {what}", flush=True)


def fail(what):
    failures.append(what)
    print(f"FAIL: {what}", flush=True)


def check(cond, what, detail=""):
    if cond:
        ok(what)
    else:
        fail(f"{what}: {detail}" if detail else what)
    return bool(cond)


class Abort(Exception):
    """What follows depends on what failed."""


def need(cond, what):
    if not cond:
        raise Abort(what)


def short(x, n=300):
    s = x if isinstance(x, str) else json.dumps(x)
    return s if len(s) <= n else s[:n] + "..."


# ---------------------------------------------------------------- HTTP

def api(base, path, body=None, key=None):
    """A direct request to the server: (status, parsed JSON or text)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method="POST" if data else "GET")
    if data:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, payload, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, payload, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    text = payload.decode("utf-8", "replace")
    return status, json.loads(text) if ctype.startswith("application/json") else text


def metric(text, name, **labels):
    """One sample's value from the Prometheus text of /metrics."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pat = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" ([0-9.e+-]+)$"
    for line in text.splitlines():
        m = re.match(pat, line)
        if m:
            return float(m.group(1))
    return None


# ---------------------------------------------------------------- WebSocket

class WebSocket:
    """A WebSocket client (RFC 6455) over a plain socket: text frames
    out (masked, as a client must send them), whole messages in."""

    def __init__(self, host, port, path, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = self.sock.recv(4096)
            if not b:
                raise ConnectionError("the DevTools endpoint closed during the handshake")
            head += b
        head, self.buf = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if not re.match(r"HTTP/1\.1 101\b", lines[0]):
            raise ConnectionError(f"WebSocket handshake: {lines[0]}")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode())
                                  .digest()).decode()
        fields = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
        if fields.get("sec-websocket-accept") != accept:
            raise ConnectionError("WebSocket handshake: a wrong Sec-WebSocket-Accept")

    def _exact(self, n):
        while len(self.buf) < n:
            b = self.sock.recv(65536)
            if not b:
                raise ConnectionError("the DevTools connection closed")
            self.buf += b
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _frame(self, opcode, payload):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + body)

    def send(self, text):
        self._frame(0x1, text.encode())

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._exact(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            mask = self._exact(4) if b1 & 0x80 else None
            payload = self._exact(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("the browser closed the DevTools connection")
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return message.decode("utf-8")

    def close(self):
        try:
            self._frame(0x8, b"")
            self.sock.close()
        except OSError:
            pass


class DevTools:
    """The DevTools protocol over one browser connection, with the
    commands of one page's session (flattened)."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.events = []
        self.session = None

    def call(self, method, session=True, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def js(self, expr):
        """The value of a JavaScript expression in the page (awaited)."""
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def wait(self, expr, what, timeout=WAIT):
        """Until expr is truthy in the page; gives its value."""
        end = time.monotonic() + timeout
        while True:
            v = self.js(expr)
            if v:
                return v
            if time.monotonic() > end:
                raise Abort(f"{what}: not after {timeout:.0f} s")
            time.sleep(0.05)

    def click(self, selector):
        """A mouse click in the middle of the element, as a person's."""
        box = self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                      "if (!e) return null; e.scrollIntoView({block: 'center'});"
                      "const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        need(box, f"{selector} is on the page")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type_into(self, selector, text):
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def set_field(self, selector, value):
        """Clears a field, then types value into it."""
        self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.value = '';"
                "e.dispatchEvent(new Event('input')); })()")
        if value:
            self.type_into(selector, value)

    def press_enter(self):
        """Enter in the focused field: keydown (with its character, which
        submits a form from a text field) and keyup."""
        self.call("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter", windowsVirtualKeyCode=13,
                  text="\r")
        self.call("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter", windowsVirtualKeyCode=13)


# ---------------------------------------------------------------- the browser

def start_browser(profile):
    log = open(os.path.join(profile, "..", "chromium.log"), "wb")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
         "--no-proxy-server", "--mute-audio", "--window-size=1280,900", f"--user-data-dir={profile}",
         "--remote-debugging-port=0", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    port_file = os.path.join(profile, "DevToolsActivePort")
    end = time.monotonic() + WAIT
    while True:
        try:
            with open(port_file) as f:
                lines = f.read().split("\n")
            if len(lines) >= 2 and lines[0].isdigit() and lines[1].startswith("/"):
                return proc, int(lines[0]), lines[1]
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > end:
            raise Abort(f"Chromium wrote no DevToolsActivePort (exit status {proc.poll()}); "
                        f"see {log.name}")
        time.sleep(0.05)


def stop_browser(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def open_page(dt, url):
    target = dt.call("Target.createTarget", session=False, url="about:blank")["targetId"]
    dt.session = dt.call("Target.attachToTarget", session=False, targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        dt.call(f"{domain}.enable")
    dt.call("Page.navigate", url=url)
    dt.wait("document.readyState === 'complete' && location.href.startsWith('http')", f"{url} loads")


# ---------------------------------------------------------------- the page

LAST = "[...document.querySelectorAll('#messages .msg.assistant')].pop()"


def last_answer(dt):
    """The last answer's state, text, reasoning and figures."""
    return dt.js(f"(() => {{ const m = {LAST}; if (!m) return null; return {{"
                 "state: m.dataset.state, text: m.querySelector('.content').textContent,"
                 "reasoning: m.querySelector('.reasoning-text').textContent,"
                 "reasoningShown: !m.querySelector('.reasoning').hidden,"
                 "stats: m.querySelector('.stats').textContent,"
                 "failure: (m.querySelector('.failure') || {}).textContent || null,"
                 "d: Object.assign({}, m.dataset) }; })()")


def wait_answer(dt, n, what):
    """Until there are n answers and the last one is no longer streaming."""
    dt.wait(f"document.querySelectorAll('#messages .msg.assistant').length === {n} && "
            f"{LAST}.dataset.state !== 'streaming'", what)
    a = last_answer(dt)
    need(a["state"] == "done", f"{what}: the answer ended '{a['state']}': {a['failure']}")
    return a


def figures_check(a, what):
    d = a["d"]
    good = all(k in d for k in ("promptTokens", "cachedTokens", "completionTokens", "ttftMs"))
    check(good and int(d["promptTokens"]) > 0 and int(d["completionTokens"]) > 0 and float(d["ttftMs"]) >= 0,
          f"{what}: the figures (prompt, cached and generated tokens, time to the first token)",
          f"{d}; {a['stats']!r}")
    check("tokens/s" in a["stats"] and "first token after" in a["stats"],
          f"{what}: the figures are shown", repr(a["stats"]))


def direct(base, messages, key=None, **sampling):
    """The same chat request made directly, without streaming."""
    st, j = api(base, "/v1/chat/completions",
                {"model": ALIAS, "messages": messages, **sampling}, key=key)
    need(st == 200 and isinstance(j, dict), f"the direct request: {st} {short(j)}")
    return j


def keyed_page(dt):
    """The page of the server with a key: the key is asked for, a wrong
    one is refused, the right one lists the models."""
    open_page(dt, URL + "/")
    check(dt.js("document.title") == "hearth", "the page's title is hearth", dt.js("document.title"))
    dt.wait("!document.getElementById('key-panel').hidden", "the page asks for the key (its models call got 401)")
    ok("the page asks for the API key when v1/models answers 401")
    dt.type_into("#key", "not-the-key")
    dt.click("#key-form button")
    dt.wait("!document.getElementById('key-panel').hidden && "
            "document.getElementById('key-why').textContent.includes('refused')",
            "a wrong key is refused and asked for again")
    ok("a wrong key is refused and the page asks again")
    dt.type_into("#key", KEY)
    dt.press_enter()
    dt.wait("document.getElementById('key-panel').hidden && document.getElementById('model').options.length > 0",
            "the models are listed once the key is given")
    models = dt.js("[...document.getElementById('model').options].map(o => o.value)")
    check(models == [ALIAS], "the model picker lists the server's model", str(models))
    check(dt.js(f"sessionStorage.getItem('hearth-api-key') === {json.dumps(KEY)}"),
          "the key is kept in sessionStorage")
    check(dt.js("document.getElementById('status').textContent") == "ready", "the page says ready",
          dt.js("document.getElementById('status').textContent"))


def conversation(dt):
    sampling = {"temperature": 0, "seed": 7, "max_tokens": 40}
    dt.set_field("#system", SYSTEM)
    dt.set_field("#temperature", "0")
    dt.set_field("#seed", "7")
    dt.set_field("#max_tokens", "40")

    # the first turn: typed, sent with Enter
    dt.type_into("#prompt", FIRST)
    dt.press_enter()
    a1 = wait_answer(dt, 1, "the first answer")
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": FIRST}]
    j = direct(URL, messages, key=KEY, **sampling)
    want = j["choices"][0]["message"]["content"]
    check(a1["text"] == want and want, "the first answer streamed into the page is the server's answer",
          f"page {a1['text']!r}, direct {want!r}")
    check(int(a1["d"].get("promptTokens", -1)) == j["usage"]["prompt_tokens"]
          and int(a1["d"].get("completionTokens", -1)) == j["usage"]["completion_tokens"],
          "the first answer's token counts are the server's", f"{a1['d']}; direct {j['usage']}")
    figures_check(a1, "the first answer")
    check(not a1["reasoningShown"], "an answer without reasoning shows no reasoning block")
    check(dt.js("document.getElementById('prompt').value") == "", "the message box is emptied when sent")

    # the second turn, with the first in its prompt: clicked
    dt.type_into("#prompt", SECOND)
    dt.click("#send")
    a2 = wait_answer(dt, 2, "the second answer")
    messages += [{"role": "assistant", "content": a1["text"]}, {"role": "user", "content": SECOND}]
    j2 = direct(URL, messages, key=KEY, **sampling)
    want2 = j2["choices"][0]["message"]["content"]
    check(a2["text"] == want2 and want2, "the second answer is the server's answer to the whole conversation",
          f"page {a2['text']!r}, direct {want2!r}")
    d1, d2 = a1["d"], a2["d"]
    check(int(d2["promptTokens"]) == j2["usage"]["prompt_tokens"] and
          int(d2["promptTokens"]) > int(d1["promptTokens"]) + int(d1["completionTokens"]),
          "the second request's prompt holds the first turn", f"{d1}; {d2}")
    check(int(d2["cachedTokens"]) > 0, "the second request's prompt comes partly from the prefix cache, "
          "and the page shows it", str(d2))
    figures_check(a2, "the second answer")
    return a1


def stop_midway(dt):
    before = api(URL, "/metrics", key=KEY)[1]
    cancelled0 = metric(before, "hearth_requests_total", finish_reason="cancelled") or 0
    dt.set_field("#max_tokens", str(LONG_TOKENS))
    dt.js("document.getElementById('ignore_eos').checked = true")
    dt.type_into("#prompt", LONG)
    dt.click("#send")
    dt.wait(f"document.querySelectorAll('#messages .msg.assistant').length === 3 && "
            f"({LAST}.dataset.state !== 'streaming' || {LAST}.querySelector('.content').textContent.length >= 40)",
            "the long answer streams")
    a = last_answer(dt)
    need(a["state"] == "streaming", f"the long answer ended '{a['state']}' before Stop was pressed "
         f"({len(a['text'])} characters of {LONG_TOKENS} tokens): {a['failure']}")
    ok("the answer appears while it streams")
    check(dt.js("!document.getElementById('stop').disabled && document.getElementById('send').disabled"),
          "while an answer streams, Stop is on and Send is off")
    dt.click("#stop")
    dt.wait(f"{LAST}.dataset.state !== 'streaming'", "the answer stops")
    a = last_answer(dt)
    check(a["state"] == "stopped" and "stopped" in a["stats"], "Stop ends the answer as stopped",
          f"{a['state']}: {a['stats']!r}")

    def server_settled():
        m = api(URL, "/metrics", key=KEY)[1]
        return (metric(m, "hearth_requests_total", finish_reason="cancelled") == cancelled0 + 1
                and metric(m, "hearth_requests_running") == 0 and metric(m, "hearth_sequences_running") == 0), m

    end = time.monotonic() + WAIT
    while True:
        done, m = server_settled()
        if done or time.monotonic() > end:
            break
        time.sleep(0.1)
    generated = metric(m, "hearth_generated_tokens_total")
    check(done, "the server cancelled the request (/metrics: one more cancelled, none running)",
          f"cancelled {metric(m, 'hearth_requests_total', finish_reason='cancelled')} (before {cancelled0}), "
          f"running {metric(m, 'hearth_requests_running')}, sequences {metric(m, 'hearth_sequences_running')}")
    n = len(a["text"])
    time.sleep(1.0)
    a = last_answer(dt)
    check(len(a["text"]) == n and a["state"] == "stopped", "the stopped answer grows no more",
          f"{n} then {len(a['text'])} characters")
    m = api(URL, "/metrics", key=KEY)[1]
    check(metric(m, "hearth_generated_tokens_total") == generated, "the server generates no more tokens",
          f"{generated} then {metric(m, 'hearth_generated_tokens_total')}")
    check(dt.js("document.getElementById('stop').disabled && !document.getElementById('send').disabled"),
          "after Stop, Send is on again and Stop off")
    dt.set_field("#max_tokens", "40")
    dt.js("document.getElementById('ignore_eos').checked = false")


def new_chat(dt, a1):
    dt.click("#new-chat")
    check(dt.js("document.querySelectorAll('#messages .msg').length") == 0, "New chat empties the page")
    dt.type_into("#prompt", FIRST)
    dt.press_enter()
    a = wait_answer(dt, 1, "the first answer of the new chat")
    check(a["text"] == a1["text"] and a["d"]["promptTokens"] == a1["d"]["promptTokens"],
          "after New chat, the same first message has the first answer's prompt and text (no history)",
          f"{a['d']} {a['text']!r}; first {a1['d']} {a1['text']!r}")


def reasoning_page(dt):
    """A server whose replies start with reasoning: the page shows it
    apart, folded once the answer begins."""
    open_page(dt, THINK_URL + "/")
    dt.wait("document.getElementById('model').options.length > 0", "the reasoning server's models")
    check(dt.js("document.getElementById('key-panel').hidden"), "without --api-key, no key is asked for")
    dt.set_field("#temperature", "0")
    dt.set_field("#max_tokens", "24")
    dt.type_into("#prompt", FIRST)
    dt.press_enter()
    a = wait_answer(dt, 1, "the reasoning server's answer")
    j = direct(THINK_URL, [{"role": "user", "content": FIRST}], temperature=0, max_tokens=24)
    msg = j["choices"][0]["message"]
    check(msg.get("reasoning_content") and a["reasoning"] == msg["reasoning_content"] and a["reasoningShown"],
          "the reasoning is shown apart, as the server's reasoning_content",
          f"page {a['reasoning']!r}, direct {msg.get('reasoning_content')!r}")
    check(a["text"] == msg["content"] and msg["content"], "the answer after the reasoning is the server's content",
          f"page {a['text']!r}, direct {msg['content']!r}")
    check(dt.js(f"!{LAST}.querySelector('.reasoning').open"), "the reasoning folds away when the answer begins")


def table_page(dt):
    """A server with several models: the picker lists every model of
    /v1/models, and a message goes to the model picked, which it loads."""
    open_page(dt, TABLE_URL + "/")
    dt.wait("document.getElementById('model').options.length > 1", "the table server's models")
    models = dt.js("[...document.getElementById('model').options].map(o => o.value)")
    st, listed = api(TABLE_URL, "/v1/models")
    need(st == 200, f"the table server's /v1/models: {st} {short(listed)}")
    check(len(models) == 2 and models == [m["id"] for m in listed["data"]],
          "the picker lists every model of /v1/models", f"{models}; {short(listed)}")
    check(not any(m["hearth"]["loaded"] for m in listed["data"]), "no model is loaded before a message",
          short(listed))
    pick = models[-1]
    dt.js(f"(() => {{ const s = document.getElementById('model'); s.value = {json.dumps(pick)};"
          "s.dispatchEvent(new Event('change')); })()")
    dt.set_field("#temperature", "0")
    dt.set_field("#max_tokens", "24")
    dt.type_into("#prompt", FIRST)
    dt.press_enter()
    a = wait_answer(dt, 1, "the picked model's answer")
    st, listed = api(TABLE_URL, "/v1/models")
    loaded = [m["id"] for m in listed["data"] if m["hearth"]["loaded"]]
    check(loaded == [pick], "the message loaded the model picked, and only it", short(listed))
    j = direct(TABLE_URL, [{"role": "user", "content": FIRST}], model=pick, temperature=0, max_tokens=24)
    check(a["text"] == j["choices"][0]["message"]["content"] and j["model"] == pick,
          "the answer is the picked model's", f"page {a['text']!r}, direct {short(j)}")


def page_problems(dt):
    """Exceptions in the page, and what the Content-Security-Policy refused."""
    found = []
    for e in dt.events:
        p = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            found.append(p.get("exceptionDetails", {}).get("exception", {}).get("description")
                         or p.get("exceptionDetails", {}).get("text"))
        elif e["method"] == "Log.entryAdded" and "Content Security Policy" in p.get("entry", {}).get("text", ""):
            found.append(p["entry"]["text"])
        elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") == "error":
            found.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
    return found


def main():
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Abort(f"the time limit of {WALL_LIMIT} s")))
    signal.alarm(WALL_LIMIT)
    work = tempfile.mkdtemp(prefix="hearth-chromium.")
    profile = os.path.join(work, "profile")
    os.mkdir(profile)
    proc = None
    try:
        proc, port, path = start_browser(profile)
        ok(f"Chromium listens for DevTools on port {port}")
        dt = DevTools(WebSocket("127.0.0.1", port, path, timeout=WAIT))
        keyed_page(dt)
        a1 = conversation(dt)
        stop_midway(dt)
        shot = dt.call("Page.captureScreenshot", format="png")["data"]
        with open(SHOT, "wb") as f:
            f.write(base64.b64decode(shot))
        check(os.path.getsize(SHOT) > 1000, f"a screenshot of the conversation: {SHOT}")
        new_chat(dt, a1)
        problems = page_problems(dt)
        check(not problems, "the keyed page threw nothing and the Content-Security-Policy refused nothing",
              short(problems, 800))
        dt.events.clear()
        reasoning_page(dt)
        problems = page_problems(dt)
        check(not problems, "the reasoning page threw nothing and the Content-Security-Policy refused nothing",
              short(problems, 800))
        dt.events.clear()
        table_page(dt)
        problems = page_problems(dt)
        check(not problems, "the page of several models threw nothing and the Content-Security-Policy refused "
              "nothing", short(problems, 800))
        dt.ws.close()
    except (Abort, RuntimeError, OSError, KeyError, ValueError) as e:
        fail(f"{type(e).__name__}: {e}")
        log = os.path.join(work, "chromium.log")
        if os.path.exists(log):
            with open(log, "rb") as f:
                tail = f.read().decode("utf-8", "replace").splitlines()[-15:]
            for line in tail:
                print(f"  chromium: {line}", file=sys.stderr)
    finally:
        signal.alarm(0)
        if proc:
            stop_browser(proc)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)


main()
