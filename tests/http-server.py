#!/usr/bin/env python3
# http-server.py -- a small model hub for tests/cli-pull.sh.
#
# usage: http-server.py ROOT PORT_FILE LOG_FILE
#
# Serves the files of ROOT on 127.0.0.1 (a free port, written to PORT_FILE)
# the way a model hub does, and logs one line per request to LOG_FILE:
# "METHOD PATH RANGE".  The repository name selects a behaviour:
#
#   /[mirror/]OWNER/models/resolve/main/FILE  302 to /cdn/FILE with the file's
#                                             SHA-256 in X-Linked-ETag
#   /OWNER/badsum/resolve/main/FILE   the same with a wrong X-Linked-ETag
#   /OWNER/etag/resolve/main/FILE     the file, its SHA-256 as the ETag
#   /OWNER/norange/resolve/main/FILE  the whole file whatever Range says
#   /OWNER/stall/resolve/main/FILE    a third of the file, then silence
#   /OWNER/html/resolve/main/FILE     200 with an HTML page
#   /cdn/FILE, /plain/FILE            the file with Range support; /cdn adds
#                                     an ETag that is not a SHA-256
#   /digest/FILE, /baddigest/FILE     the file with a right or wrong
#                                     Repr-Digest: sha-256=:BASE64:
#   /OWNER/only-TEXT/resolve/main/FILE  as etag
#   /api/models/OWNER/REPO            a JSON listing of ROOT's files; for a
#                                     REPO "only-TEXT", of those whose names
#                                     contain TEXT; "badjson" and "unsafe"
#                                     give a broken listing and one naming
#                                     a file outside the repository
import base64
import hashlib
import http.server
import json
import os
import re
import sys
import time
import urllib.parse

ROOT, PORT_FILE, LOG_FILE = sys.argv[1], sys.argv[2], sys.argv[3]
_digests = {}


def sha256_of(path):
    if path not in _digests:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _digests[path] = h.digest()
    return _digests[path]


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def log_request_line(self):
        with open(LOG_FILE, "a") as log:
            log.write("%s %s %s\n" % (self.command, self.path, self.headers.get("Range", "-")))

    def local_file(self, name):
        if "/" in name or name.startswith("."):
            return None
        path = os.path.join(ROOT, name)
        return path if os.path.isfile(path) else None

    def not_found(self):
        body = b"Entry not found"
        self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_file(self, path, extra_headers=(), honour_range=True, stall=False):
        size = os.path.getsize(path)
        start, status = 0, 200
        m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if honour_range and m:
            start = int(m.group(1))
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        for name, value in extra_headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(size - start))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        self.send_header("Accept-Ranges", "bytes" if honour_range else "none")
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
        if stall:
            self.wfile.write(data[: len(data) // 3])
            self.wfile.flush()
            time.sleep(60)
            return
        self.wfile.write(data)

    def do_GET(self):
        self.log_request_line()
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/mirror/"):
            path = path[len("/mirror"):]
        m = re.fullmatch(r"/([^/]+)/([^/]+)/resolve/main/(.+)", path)
        if m:
            return self.hub_file(m.group(2), m.group(3))
        m = re.fullmatch(r"/(cdn|plain|digest|baddigest)/(.+)", path)
        if m:
            kind, local = m.group(1), self.local_file(m.group(2))
            if not local:
                return self.not_found()
            headers = []
            if kind == "cdn":
                headers.append(("ETag", '"0123456789abcdef0123456789abcdef-3"'))
            elif kind in ("digest", "baddigest"):
                digest = sha256_of(local)
                if kind == "baddigest":
                    digest = hashlib.sha256(b"something else").digest()
                headers.append(("Repr-Digest", "sha-256=:%s:" % base64.b64encode(digest).decode()))
            return self.send_file(local, headers)
        m = re.fullmatch(r"/api/models/([^/]+)/([^/]+)", path)
        if m:
            files = sorted(os.listdir(ROOT))
            repo = m.group(2)
            if repo.startswith("only-"):
                files = [f for f in files if repo[len("only-"):] in f]
            elif repo == "unsafe":
                files = ["../../escaped-Q4_K_M.gguf"]
            if repo == "badjson":
                body = b'{"siblings": [{"rfilename": "a.gguf"'
            else:
                body = json.dumps({"id": "%s/%s" % m.groups(),
                               "siblings": [{"rfilename": f} for f in files]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.not_found()

    def hub_file(self, repo, name):
        local = self.local_file(name)
        if not local:
            return self.not_found()
        digest = sha256_of(local).hex()
        if repo in ("models", "badsum"):
            if repo == "badsum":
                digest = hashlib.sha256(b"not the file").hexdigest()
            self.send_response(302)
            self.send_header("Location", "/cdn/" + name)
            self.send_header("X-Linked-ETag", '"%s"' % digest)
            self.send_header("X-Linked-Size", str(os.path.getsize(local)))
            body = b"Found. Redirecting"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif repo == "etag" or repo.startswith("only-"):
            self.send_file(local, [("ETag", '"%s"' % digest)])
        elif repo == "norange":
            self.send_file(local, [("X-Linked-ETag", '"%s"' % digest)], honour_range=False)
        elif repo == "stall":
            self.send_file(local, stall=True)
        elif repo == "html":
            body = b"<!DOCTYPE html><html><body>Sign in to continue</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.not_found()


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
server.daemon_threads = True
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
