#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""rtctl's own HTTP/1.1 client (issue 14) against servers that misbehave: fake servers on unix sockets
answer with garbage, cut answers, silence, oversize heads and awkwardly split event streams. rtctl must say
what was wrong and exit (69 unreachable, 76 malformed), never hang or crash. Also the reasons it cannot
connect: no socket, a stale socket, permission denied on the socket and on a parent directory, checked as
an unprivileged user. No rtd runs here and no knob is touched."""
import os
import pty
import socket
import subprocess
import tempfile
import threading
import time

from rtdtest import RTCTL, SOURCE, need_root, run, run_tests, test, TestUser


class FakeServer:
    """Accepts connections on a unix socket; answer(conn, request_bytes) speaks for rtd."""

    def __init__(self, d, answer, name="fake.sock"):
        self.path = os.path.join(d, name)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.answer = answer
        self.requests = []
        self.conns = []
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        try:
            while True:
                req = read_request(c)
                if req is None:
                    return
                self.requests.append(req)
                if self.answer(c, req) is False:
                    return
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def read_request(c):
    data = b""
    while b"\r\n\r\n" not in data:
        b = c.recv(65536)
        if not b:
            return None
        data += b
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
            while len(body) < n:
                body += c.recv(65536)
    return head + b"\r\n\r\n" + body


def rtctl(sock, *args, timeout=10, env_extra=None, user=None):
    env = {**os.environ, "RTD_SOCKET": sock, "RTCTL_TIMEOUT": "1", **(env_extra or {})}
    start = time.monotonic()
    p = run([RTCTL, *args], env=env, timeout=timeout, user=user)
    p.took = time.monotonic() - start
    return p


def send(data):
    def answer(c, req):
        c.sendall(data)
        return False        # then close

    return answer


JSON_OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s'


@test
def malformed_answers_are_named_not_guessed():
    cases = [
        (b"SSH-2.0-OpenSSH_9.2\r\n", "does not start with an HTTP/1.x status line"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n",
         "chunk size is not a hexadecimal number"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab", "two different Content-Length"),
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", "longer than 8 KiB"),
        (b"HTTP/1.1 200 OK\r\n" + b"X-Many: 123456789\r\n" * 5000 + b"\r\n", "larger than 64 KiB"),
        (b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n", "folded"),
    ]
    with tempfile.TemporaryDirectory() as d:
        for i, (data, why) in enumerate(cases):
            srv = FakeServer(d, send(data), f"m{i}.sock")
            p = rtctl(srv.path, "status")
            srv.close()
            assert p.returncode == 76, (data[:40], p.returncode, p.stderr)
            assert "malformed response" in p.stderr and why in p.stderr, (why, p.stderr)
            assert p.took < 5, p.took


@test
def cut_answers_and_silence_end_with_69():
    body = b'{"version":"x"}'
    cases = [
        (send(b""), "closed the connection early: the connection closed before a response"),
        (send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + body), "before the end of the body"),
        (send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"), "before the last chunk"),
        (lambda c, req: time.sleep(30), "did not answer within 1 s"),
        # Headers, then nothing: the body's wait is bounded too.
        (lambda c, req: (c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab"), time.sleep(30)),
         "did not answer within 1 s"),
    ]
    with tempfile.TemporaryDirectory() as d:
        for i, (answer, why) in enumerate(cases):
            srv = FakeServer(d, answer, f"c{i}.sock")
            p = rtctl(srv.path, "status")
            srv.close()
            assert p.returncode == 69 and why in p.stderr, (why, p.returncode, p.stderr)
            assert p.took < 5, p.took


@test
def requests_are_well_formed_and_the_connection_is_reused():
    def answer(c, req):
        line = req.split(b"\r\n")[0]
        if line.startswith(b"POST /v1/jobs "):
            b = b'{"id":7,"state":"queued"}'
            c.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(b), b))
        elif line.startswith(b"GET /v1/events?job=7 "):
            # An interim 100, then the events in odd chunks with an extension, CRLF and CR line ends, a
            # comment, multi-line data; rtctl must stop at the job's end.
            ev = (b": connected\r\n\r\nevent: job\r\ndata: {\"id\":7,\r\ndata: \"state\":\"running\"}\r\n\r\n"
                  b"event: job\rdata: {\"id\":7,\"state\":\"failed\",\"exit_code\":3}\r\r")
            c.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                      b"Content-Type: text/event-stream\r\n\r\n")
            for i in range(0, len(ev), 7):
                piece = ev[i:i + 7]
                c.sendall(b"%x;piece=%d\r\n%s\r\n" % (len(piece), i, piece))
                time.sleep(0.002)
            c.sendall(b"0\r\n\r\n")
        else:
            c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        return True

    with tempfile.TemporaryDirectory() as d:
        srv = FakeServer(d, answer)
        p = rtctl(srv.path, "submit", "--wait", "-q", "-E", "--", "/bin/false")
        srv.close()
        assert p.returncode == 3, (p.returncode, p.stderr)
        reqs = srv.requests
        assert len(reqs) == 2 and len(srv.conns) == 1, (reqs, len(srv.conns))
        head, _, body = reqs[0].partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0] == b"POST /v1/jobs HTTP/1.1", lines
        assert b"Host: rtd" in lines and b"Content-Type: application/json" in lines, lines
        assert b"Content-Length: %d" % len(body) in lines, lines
        assert b'"argv":["/bin/false"]' in body, body
        assert reqs[1].startswith(b"GET /v1/events?job=7 HTTP/1.1\r\n"), reqs[1]


@test
def query_values_are_escaped():
    with tempfile.TemporaryDirectory() as d:
        srv = FakeServer(d, send(JSON_OK % (11, b'{"jobs":[]}')))
        p = rtctl(srv.path, "list", "--state", "queued&user=root", "--user", "a b")
        srv.close()
        assert p.returncode == 0 and "No jobs." in p.stdout, p
        assert srv.requests[0].startswith(b"GET /v1/jobs?limit=50&state=queued%26user%3Droot&user=a%20b HTTP/1.1\r\n"), \
            srv.requests


@test
def an_idle_kept_connection_closed_by_rtd_is_retried_once():
    # rtd may close a kept-alive connection between two requests: the next request goes on a new one.
    def answer(c, req):
        line = req.split(b"\r\n")[0]
        if line.startswith(b"POST"):
            b = b'{"id":9}'
            c.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(b), b))
            c.shutdown(socket.SHUT_RDWR)
            return False
        ev = b'event: job\ndata: {"id":9,"state":"succeeded","exit_code":0}\n\n'
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + ev)
        return False

    with tempfile.TemporaryDirectory() as d:
        srv = FakeServer(d, answer)
        p = rtctl(srv.path, "submit", "--wait", "-q", "-E", "--", "/bin/true")
        srv.close()
        assert p.returncode == 0 and len(srv.requests) == 2 and len(srv.conns) == 2, (p, srv.requests)


@test
def a_refusal_before_the_body_is_read_is_shown():
    # rtd may refuse a large request from its head and close without reading the body: rtctl shows the
    # refusal instead of a broken pipe.
    def answer(c, req):
        b = b'{"title":"Request too large","detail":"the body is larger than 64 KiB"}'
        c.sendall(b"HTTP/1.1 413 Content Too Large\r\nContent-Type: application/problem+json\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(b), b))
        return False

    class HeadOnly(FakeServer):
        def serve(self, c):
            data = b""
            while b"\r\n\r\n" not in data:
                data += c.recv(4096)
            self.requests.append(data)
            answer(c, data)
            c.close()

    with tempfile.TemporaryDirectory() as d:
        srv = HeadOnly(d, answer)
        big = ["-e", "X%d=%s" % (0, "y" * 100000)]
        for i in range(1, 12):
            big += ["-e", "X%d=%s" % (i, "y" * 100000)]
        p = rtctl(srv.path, "submit", "-E", *big, "--", "/bin/true")
        srv.close()
        assert p.returncode == 1 and "Request too large: the body is larger than 64 KiB" in p.stderr, \
            (p.returncode, p.stderr)


@test
def a_malformed_event_stream_is_not_waited_on():
    def answer(c, req):
        if req.startswith(b"POST"):
            b = b'{"id":4}'
            c.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(b), b))
            return True
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nevent: job\ndata: \r\nXX")
        time.sleep(30)

    with tempfile.TemporaryDirectory() as d:
        srv = FakeServer(d, answer)
        p = rtctl(srv.path, "submit", "--wait", "-q", "-E", "--", "/bin/true")
        srv.close()
        assert p.returncode == 76 and "chunk is longer than its size" in p.stderr, (p.returncode, p.stderr)
        assert p.took < 5, p.took


def status_on(sock, env_extra, tty):
    """rtctl status's stdout on a pseudo-terminal (tty) or a pipe."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update({"RTD_SOCKET": sock, "TERM": "xterm", **env_extra})
    if not tty:
        return subprocess.run([RTCTL, "status"], env=env, capture_output=True, timeout=10).stdout
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(RTCTL, [RTCTL, "status"], env)
    out = b""
    while True:
        try:
            b = os.read(fd, 65536)
        except OSError:
            break
        if not b:
            break
        out += b
    os.waitpid(pid, 0)
    return out


@test
def colour_on_a_terminal_unless_no_color():
    status = open(os.path.join(SOURCE, "tests/fixtures/views/status-reserved.json"), "rb").read()

    def answer(c, req):
        c.sendall(JSON_OK % (len(status), status))
        return True

    with tempfile.TemporaryDirectory() as d:
        srv = FakeServer(d, answer)
        tty = status_on(srv.path, {}, True)
        assert b"\033[" in tty and b"Reservation" in tty, tty
        for env, on_tty in (({"NO_COLOR": "1"}, True), ({}, False), ({"TERM": "dumb"}, True)):
            out = status_on(srv.path, env, on_tty)
            assert b"\033" not in out and b"Reservation" in out, (env, on_tty, out)
        # An empty NO_COLOR does not count (no-color.org).
        assert b"\033[" in status_on(srv.path, {"NO_COLOR": ""}, True)
        srv.close()


@test
def why_rtctl_cannot_connect():
    need_root()
    with tempfile.TemporaryDirectory() as d, TestUser("rtdhttp-u1") as u:
        os.chmod(d, 0o755)
        p = rtctl(os.path.join(d, "none.sock"), "status")
        assert p.returncode == 69 and "does not exist" in p.stderr, p
        # Bound but nobody listening: a stale socket.
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(os.path.join(d, "stale.sock"))
        p = rtctl(os.path.join(d, "stale.sock"), "status")
        stale.close()
        assert p.returncode == 69 and "nobody is listening" in p.stderr, p
        # A live socket the user may not write to.
        srv = FakeServer(d, send(JSON_OK % (2, b"{}")))
        os.chmod(srv.path, 0o600)
        p = rtctl(srv.path, "status", user=u.name)
        assert p.returncode == 69 and "permission denied on " + srv.path in p.stderr, p
        assert "usermod -aG rtd" in p.stderr, p
        # A parent directory the user may not search.
        inner = os.path.join(d, "private")
        os.mkdir(inner, 0o700)
        srv2 = FakeServer(inner, send(JSON_OK % (2, b"{}")))
        os.chmod(srv2.path, 0o666)
        p = rtctl(srv2.path, "status", user=u.name)
        assert p.returncode == 69 and "permission denied on a parent directory" in p.stderr, p
        # And root gets through to the same socket (the server answers, status prints).
        p = rtctl(srv2.path, "--json", "status")
        assert p.returncode == 0 and p.stdout.strip() == "{}", p
        srv.close()
        srv2.close()


if __name__ == "__main__":
    run_tests()
