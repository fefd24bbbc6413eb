# SPDX-License-Identifier: MIT
# bench/benchlib.py: what the benchmark scripts share: HTTP over rtd's unix socket, percentiles, and
# rewriting one "## Title" section of docs/benchmarks.md.
import http.client
import json
import os
import re
import socket


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("rtd", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path)


def api(conn, method, path, body=None):
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    return r.status, json.loads(data) if data else None


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def write_doc(path, section, title):
    """Replace the "## title" section of path by section (appended when there is none)."""
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n\n"
    pattern = re.compile(r"^## " + re.escape(title) + r"\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda m: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)
