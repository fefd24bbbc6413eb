#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Hostile clients (issue 12): raw requests from an unprivileged member of the submit group, and from a
local user on the metrics port, as a table: framing, sizes, encodings, slow clients. Each row is sent as
raw bytes by a process running as that user; the row states the status expected, that the connection is
closed after it, and the API is asked afterwards whether a job was created. Then the per-uid caps: 260
idle event streams from one user, and 260 idle connections to the metrics port, must not lock out root's
`rtctl status` or a scrape. Needs root (to create the users); holds /tmp/rtd-knobs.lock for its whole run."""
import json
import os
import socket
import subprocess
import sys
import time

from rtdtest import RTCTL, Knobs, Rtd, Skip, TestUser, knob_lock, knobs_as_found, need_root, run_tests, test
GROUP = "rtdsecgrp"
USER = "rtdsec-u1"       # member of the submit group
OTHER = "rtdsec-u2"      # member too: must still get in while USER floods
STRANGER = "rtdsec-u3"   # no group: only the metrics port is open to them
HEADER_TIMEOUT = 2
CONF = (f"[Daemon]\nSocketGroup={GROUP}\nHeaderTimeoutSec={HEADER_TIMEOUT}\n"
        f"[Reserve]\nIRQs=keep\nCheckIntervalSec=0\n[Access]\nSubmitGroup={GROUP}\n")
GIB10 = 10 * 1024 ** 3
SPEC = b'{"argv":["/bin/true"],"env":{"PATH":"/usr/bin:/bin"}}'
BAD_JSON = b'{"argv":["/bin/true\xff\xfe"]}'


# ---- the client side: runs as the unprivileged user (setpriv), talks raw bytes ----

def connect(target):
    if target.startswith("/"):
        s = socket.socket(socket.AF_UNIX)
        s.connect(target)
    else:
        host, port = target.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
    return s


def exchange(target, pieces, gap, wait):
    """Send the pieces (gap seconds apart), read one response; report its status, body, whether a 100
    Continue came first and whether the server closed the connection after the response."""
    s = connect(target)
    s.settimeout(wait)
    start = time.time()
    out = {"status": 0, "closed": False, "continue": False, "body": "", "error": None}
    try:
        for i, p in enumerate(pieces):
            if i and gap:
                time.sleep(gap)
            s.sendall(p)
    except OSError as e:
        out["error"] = repr(e)      # the server may answer and close before the client has sent all
    data = b""
    try:
        while True:
            head, sep, rest = data.partition(b"\r\n\r\n")
            if sep and head.startswith(b"HTTP/1.1 100"):
                out["continue"] = True
                data = rest
                continue
            if sep:
                lines = head.split(b"\r\n")
                out["status"] = int(lines[0].split()[1])
                hdrs = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip() for l in lines[1:] if b":" in l}
                n = int(hdrs.get(b"content-length", b"-1"))
                if n >= 0 and len(rest) >= n:
                    out["body"] = rest[:n].decode("utf-8", "replace")
                    break
            d = s.recv(65536)
            if not d:
                out["closed"] = True
                out["body"] = data.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")
                break
            data += d
        # Closed after the response? Anything more than EOF within the wait is a failure.
        while not out["closed"]:
            d = s.recv(65536)
            if not d:
                out["closed"] = True
            else:
                out["extra"] = out.get("extra", "") + d.decode("utf-8", "replace")
    except (socket.timeout, ConnectionResetError) as e:
        out["error"] = (out["error"] or "") + " " + repr(e)
        if isinstance(e, ConnectionResetError):
            out["closed"] = True
    out["seconds"] = time.time() - start
    s.close()
    return out


def hold(target, n, request):
    """Open n connections, send request on each, report what came back within 2 s, keep them open until
    stdin closes."""
    socks, statuses = [], {}
    for _ in range(n):
        try:
            s = connect(target)
        except OSError as e:
            statuses[repr(e)] = statuses.get(repr(e), 0) + 1
            continue
        try:
            if request:
                s.sendall(request)
        except OSError:
            pass        # refused at accept: the answer may be waiting all the same
        socks.append(s)
    time.sleep(2)
    for s in socks:
        s.setblocking(False)
        try:
            d = s.recv(200)
            k = d.split(b"\r\n")[0].decode() if d else "closed"
        except BlockingIOError:
            k = "open, no answer"
        except OSError as e:
            k = repr(e)
        statuses[k] = statuses.get(k, 0) + 1
    print(json.dumps(statuses), flush=True)
    sys.stdin.read()


def as_user(user, *args, **kw):
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--",
            "/usr/bin/python3", os.path.abspath(__file__), *args]


def send_as(user, target, pieces, gap=0.0, wait=8):
    p = subprocess.run(as_user(user, "--exchange", target, str(gap), str(wait)),
                       input=json.dumps([x.decode("latin-1") for x in pieces]), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


# ---- the table ----

def req(method, path, headers=(), body=b"", host=b"rtd"):
    h = b"".join(x + b"\r\n" for x in headers)
    hostline = b"Host: " + host + b"\r\n" if host is not None else b""
    return [method + b" " + path + b" HTTP/1.1\r\n" + hostline + h + b"\r\n" + body]


CL = b"Content-Length: %d"
JSON = b"Content-Type: application/json"

# (name, pieces, expected status, job created?)  Every row also expects the connection closed after it.
CONTROL_TABLE = [
    ("valid submit (control row)", req(b"POST", b"/v1/jobs", [JSON, CL % len(SPEC)], SPEC), 201, True),
    ("CL and TE together", req(b"POST", b"/v1/jobs", [JSON, CL % len(SPEC), b"Transfer-Encoding: chunked"],
                               b"%x\r\n" % len(SPEC) + SPEC + b"\r\n0\r\n\r\n"), 400, False),
    ("TE and CL together, TE first", req(b"POST", b"/v1/jobs", [JSON, b"Transfer-Encoding: chunked", CL % 3],
                                         b"%x\r\n" % len(SPEC) + SPEC + b"\r\n0\r\n\r\n"), 400, False),
    ("two different Content-Length", req(b"POST", b"/v1/jobs", [JSON, CL % len(SPEC), CL % (len(SPEC) + 5)],
                                         SPEC + b"XXXXX"), 400, False),
    ("repeated equal Content-Length", req(b"POST", b"/v1/jobs", [JSON, CL % len(SPEC), CL % len(SPEC)], SPEC),
     400, False),
    ("Content-Length list", req(b"POST", b"/v1/jobs", [JSON, b"Content-Length: %d, %d" % (len(SPEC), len(SPEC))],
                                SPEC), 400, False),
    ("Transfer-Encoding gzip, chunked", req(b"POST", b"/v1/jobs", [JSON, b"Transfer-Encoding: gzip, chunked"],
                                            b"%x\r\n" % len(SPEC) + SPEC + b"\r\n0\r\n\r\n"), 400, False),
    ("Transfer-Encoding identity", req(b"POST", b"/v1/jobs", [JSON, b"Transfer-Encoding: identity", CL % len(SPEC)],
                                       SPEC), 400, False),
    ("NUL in a header value", req(b"POST", b"/v1/jobs", [JSON, b"X-A: a\x00b", CL % len(SPEC)], SPEC), 400, False),
    ("NUL hiding a second Content-Length", req(b"POST", b"/v1/jobs", [JSON, CL % len(SPEC) + b"\x00" + b"0"], SPEC),
     400, False),
    ("control byte in a header value", req(b"POST", b"/v1/jobs", [JSON, b"X-A: a\x01b", CL % len(SPEC)], SPEC),
     400, False),
    ("space before the colon", req(b"POST", b"/v1/jobs", [JSON, b"Content-Length : %d" % len(SPEC)], SPEC),
     400, False),
    ("obs-fold continuation line", req(b"POST", b"/v1/jobs", [JSON, CL % len(SPEC), b"X-A: a", b" folded"], SPEC),
     400, False),
    ("bare LF line ends", [b"POST /v1/jobs HTTP/1.1\nHost: rtd\nContent-Type: application/json\n"
                           b"Content-Length: %d\n\n" % len(SPEC) + SPEC], 400, False),
    ("declared 10 GiB body", req(b"POST", b"/v1/jobs", [JSON, CL % GIB10]), 413, False),
    ("Expect 100-continue with a too large body", req(b"POST", b"/v1/jobs", [JSON, CL % (2 << 20),
                                                                             b"Expect: 100-continue"]), 413, False),
    ("unknown expectation", req(b"POST", b"/v1/jobs", [JSON, CL % len(SPEC), b"Expect: 200-ok"], SPEC), 417, False),
    ("chunked body over MaxRequestBodyBytes", req(b"POST", b"/v1/jobs", [JSON, b"Transfer-Encoding: chunked"],
                                                  b"".join(b"10000\r\n" + b" " * 0x10000 + b"\r\n" for _ in range(20))
                                                  + b"0\r\n\r\n"), 413, False),
    ("100 kB query string", req(b"GET", b"/v1/jobs?x=" + b"a" * 100000), 414, False),
    ("20 kB header field", req(b"GET", b"/v1/status", [b"X-Big: " + b"b" * 20000]), 431, False),
    ("100 header fields", req(b"GET", b"/v1/status", [b"X-%d: y" % i for i in range(100)]), 431, False),
    ("HTTP/1.1 without Host", req(b"GET", b"/v1/status", host=None), 400, False),
    ("%00 in a path segment", req(b"GET", b"/v1/jobs/1%00/output"), 400, False),
    ("%2F in a path segment", req(b"GET", b"/v1/jobs/1%2Foutput"), 400, False),
    ("%00 in a query value", req(b"GET", b"/v1/jobs?state=queued%00x"), 400, False),
    ("invalid UTF-8 in the path, encoded", req(b"GET", b"/v1/jobs/%C3%28"), 400, False),
    ("invalid UTF-8 in the path, raw", req(b"GET", b"/v1/jobs/\xff\xfe"), 400, False),
    ("invalid UTF-8 in a query value", req(b"GET", b"/v1/jobs/1/output?stream=%FF"), 400, False),
    ("invalid UTF-8 in a header value", req(b"GET", b"/v1/status", [b"X-A: \xc3\x28"]), 400, False),
    ("invalid UTF-8 in the JSON body", req(b"POST", b"/v1/jobs", [JSON, CL % len(BAD_JSON)], BAD_JSON), 400, False),
    ("request smuggled behind CL+TE", req(b"POST", b"/v1/jobs", [JSON, CL % 4, b"Transfer-Encoding: chunked"],
                                          b"0\r\n\r\n" + b"POST /v1/jobs HTTP/1.1\r\nHost: rtd\r\n"
                                          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(SPEC)
                                          + SPEC), 400, False),
    ("request pipelined behind a valid one", req(b"GET", b"/v1/status") + req(b"POST", b"/v1/jobs",
                                                                              [JSON, CL % len(SPEC)], SPEC),
     200, False),
    ("head never completed (slow client)", [b"GET /v1/status HTTP/1.1\r\nHost: rtd\r\n"], 408, False),
]


def _jobs(rtd):
    st, _, body = rtd.http("GET", "/v1/jobs?limit=1000")
    assert st == 200, (st, body)
    return len(json.loads(body)["jobs"])


def check_row(rtd, target, user, name, pieces, status, creates, gap=0.0):
    before = _jobs(rtd)
    out = send_as(user, target, pieces, gap)
    after = _jobs(rtd)
    where = f"{name}: {out}"
    assert out["status"] == status, where
    assert out["closed"], "connection left open after the response: " + where
    assert not out["continue"], "100 Continue sent: " + where
    assert (after - before) == (1 if creates else 0), f"{after - before} jobs created by {where}"
    if status >= 400:
        try:
            p = json.loads(out["body"])     # problem+json that parses, also for invalid UTF-8
        except ValueError:
            raise AssertionError("the answer is not JSON: " + where)
        assert p["status"] == status and p["detail"], where
    return out


class SecRtd:
    def __init__(self, metrics=False, conf=""):
        self.metrics, self.conf = metrics, conf

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs 2 CPUs: CPU 0 for housekeeping, CPU 1 reserved so jobs can be created")
        self.knobs = Knobs()
        self.port = free_port() if self.metrics else None
        self.rtd = Rtd(conf=CONF + self.conf, reserve="1", metrics_port=self.port, name="sec")
        try:
            self.rtd.start()
        except BaseException:
            self.rtd.cleanup()
            raise
        return self.rtd

    def __exit__(self, *exc):
        self.rtd.cleanup()
        knobs_as_found(self.knobs, exc[0])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@test
def test_control_socket_table():
    with TestUser(USER, [GROUP]), SecRtd() as rtd:
        failures = []
        for name, pieces, status, creates in CONTROL_TABLE:
            try:
                out = check_row(rtd, rtd.socket, USER, name, pieces, status, creates)
                if name.startswith("declared 10 GiB") or name.startswith("Expect"):
                    assert out["seconds"] < 5, f"{name}: answer took {out['seconds']:.1f}s"
            except AssertionError as e:
                failures.append(str(e))
        assert not failures, f"{len(failures)} of {len(CONTROL_TABLE)} rows failed:\n" + "\n".join(failures)


@test
def test_slow_drip_head():
    """A head sent one byte at a time (slowloris) is cut off, not waited for."""
    with TestUser(USER, [GROUP]), SecRtd() as rtd:
        head = b"GET /v1/status HTTP/1.1\r\nHost: rtd\r\nX-Slow: " + b"s" * 200 + b"\r\n\r\n"
        out = send_as(USER, rtd.socket, [bytes([c]) for c in head], gap=0.02, wait=HEADER_TIMEOUT + 8)
        assert out["status"] in (400, 408) and out["closed"], out
        assert out["seconds"] < HEADER_TIMEOUT + 5, out


@test
def test_submit_1mib_is_quick():
    """A 1 MiB body is read at socket speed: answered within 5 s (it took 9 s at 100 kB/s)."""
    with TestUser(USER, [GROUP]), SecRtd() as rtd:
        name = b"n" * ((1 << 20) - len(SPEC) - 20)
        body = b'{"name":"' + name + b'",' + SPEC[1:]
        body = body + b" " * ((1 << 20) - len(body))
        out = send_as(USER, rtd.socket, req(b"POST", b"/v1/jobs", [JSON, CL % len(body)], body), wait=20)
        assert out["status"] in (201, 400, 422), out     # the name is too long for a job: judged, not slow
        assert out["seconds"] < 5, out


METRICS_TABLE = [
    ("scrape with Host localhost", lambda port: req(b"GET", b"/metrics", host=b"localhost:%d" % port), 200),
    ("scrape with Host 127.0.0.1", lambda port: req(b"GET", b"/metrics", host=b"127.0.0.1:%d" % port), 200),
    ("scrape with Host [::1]", lambda port: req(b"GET", b"/metrics", host=b"[::1]:%d" % port), 200),
    ("DNS rebinding: Host evil.example", lambda port: req(b"GET", b"/metrics", host=b"evil.example:%d" % port), 421),
    ("DNS rebinding: Host 10.0.0.1", lambda port: req(b"GET", b"/v1/metrics", host=b"10.0.0.1"), 421),
    ("Host localhost.evil.example", lambda port: req(b"GET", b"/metrics", host=b"localhost.evil.example"), 421),
    ("no Host", lambda port: req(b"GET", b"/metrics", host=None), 400),
    ("a body on the read-only listener", lambda port: req(b"POST", b"/metrics", [CL % 5], b"hello",
                                                           host=b"localhost"), 413),
    ("control routes are not served", lambda port: req(b"GET", b"/v1/status", host=b"localhost"), 403),
    ("job routes are not served", lambda port: req(b"GET", b"/v1/jobs", host=b"localhost"), 403),
    ("CL and TE together", lambda port: req(b"GET", b"/metrics", [CL % 0, b"Transfer-Encoding: chunked"],
                                            b"0\r\n\r\n", host=b"localhost"), 400),
]


def walk_keys(j, keys):
    if isinstance(j, dict):
        for k, v in j.items():
            keys.add(k)
            walk_keys(v, keys)
    elif isinstance(j, list):
        for v in j:
            walk_keys(v, keys)
    return keys


@test
def test_metrics_port_table():
    with TestUser(STRANGER), SecRtd(metrics=True) as rtd:
        target = f"127.0.0.1:{rtd_port(rtd)}"
        failures = []
        for name, make, status in METRICS_TABLE:
            out = send_as(STRANGER, target, make(rtd_port(rtd)))
            if out["status"] != status or not out["closed"]:
                failures.append(f"{name}: expected {status} and closed, got {out}")
        assert not failures, "\n".join(failures)


def rtd_port(rtd):
    return int(open(rtd.config).read().split("MetricsListen=127.0.0.1:")[1].split("\n")[0])


@test
def test_metrics_port_names_no_pid_or_job():
    """Every read-only route on TCP: no key or label that names a pid or a job id (the control socket
    has them: current_job on each CPU, the top intruders' pids)."""
    with TestUser(STRANGER), SecRtd(metrics=True) as rtd:
        target = f"127.0.0.1:{rtd_port(rtd)}"
        out = send_as(STRANGER, target, req(b"GET", b"/v1/metrics", host=b"localhost"))
        assert out["status"] == 200, out
        keys = walk_keys(json.loads(out["body"]), set())
        assert not keys & {"pid", "current_job", "job", "job_id"}, sorted(keys)
        out = send_as(STRANGER, target, req(b"GET", b"/metrics", host=b"localhost"))
        assert out["status"] == 200, out
        for line in out["body"].splitlines():
            assert 'pid="' not in line and 'job="' not in line and 'job_id="' not in line, line


def holder(user, target, n, request=b""):
    """A process of user's holding n connections (request sent on each); its first line is its report."""
    p = subprocess.Popen(as_user(user, "--hold", target, str(n), request.hex()), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    return p, json.loads(p.stdout.readline())


def release(p):
    p.stdin.close()
    p.wait(30)


@test
def test_event_flood_leaves_room():
    """260 idle GET /v1/events from one user: root's rtctl status and another user still get in."""
    with TestUser(USER, [GROUP]), TestUser(OTHER, [GROUP]), SecRtd() as rtd:
        p, report = holder(USER, rtd.socket, 260, b"GET /v1/events HTTP/1.1\r\nHost: rtd\r\n\r\n")
        try:
            start = time.time()
            r = subprocess.run([RTCTL, "--socket", rtd.socket, "status"], capture_output=True, text=True, timeout=30)
            took = time.time() - start
            assert r.returncode == 0 and took < 5, (r.returncode, took, r.stderr)
            out = send_as(OTHER, rtd.socket, req(b"GET", b"/v1/status"))
            assert out["status"] == 200, out
            streams = report.get("HTTP/1.1 200 OK", 0)
            assert 0 < streams <= 16, report                 # MaxStreamsPerUser=16
            assert report.get("HTTP/1.1 429 Too Many Requests", 0) >= 260 - 32, report
        finally:
            release(p)


@test
def test_reserved_admin_slots():
    """Two users together take every slot they may: the rest of MaxConnections= is root's."""
    conf = "[Daemon]\nMaxConnections=40\nReservedAdminConnections=16\nMaxConnectionsPerUser=20\nMaxStreamsPerUser=40\n"
    events = b"GET /v1/events HTTP/1.1\r\nHost: rtd\r\n\r\n"
    with TestUser(USER, [GROUP]), TestUser(OTHER, [GROUP]), SecRtd(conf=conf) as rtd:
        p1, r1 = holder(USER, rtd.socket, 20, events)
        p2, r2 = holder(OTHER, rtd.socket, 20, events)
        try:
            assert r1.get("HTTP/1.1 200 OK") == 20, r1
            assert r2.get("HTTP/1.1 200 OK") == 4 and r2.get("HTTP/1.1 503 Service Unavailable") == 16, r2
            out = send_as(OTHER, rtd.socket, req(b"GET", b"/v1/status"))
            assert out["status"] == 503 and "ReservedAdminConnections" in out["body"], out
            start = time.time()
            r = subprocess.run([RTCTL, "--socket", rtd.socket, "status"], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0 and time.time() - start < 5, r.stderr
        finally:
            release(p1)
            release(p2)


@test
def test_metrics_flood_leaves_room():
    """260 silent connections to the metrics port from one user: a scrape still answers promptly."""
    with TestUser(STRANGER), SecRtd(metrics=True) as rtd:
        target = f"127.0.0.1:{rtd_port(rtd)}"
        p, report = holder(STRANGER, target, 260)
        try:
            start = time.time()
            out = send_as("root", target, req(b"GET", b"/metrics", host=b"localhost"), wait=10)
            assert out["status"] == 200 and time.time() - start < 5, (out, report)
        finally:
            release(p)


def client_main():
    if sys.argv[1] == "--exchange":
        pieces = [x.encode("latin-1") for x in json.loads(sys.stdin.read())]
        print(json.dumps(exchange(sys.argv[2], pieces, float(sys.argv[3]), float(sys.argv[4]))))
    elif sys.argv[1] == "--hold":
        hold(sys.argv[2], int(sys.argv[3]), bytes.fromhex(sys.argv[4]))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("--"):
        client_main()
        sys.exit(0)
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
