"""`reportgen serve` as a static server should be: nothing outside the site, no listings,
slow or numerous clients answered or refused cleanly, a log that cannot drive the terminal.

Every load here is bounded in count and time on 127.0.0.1 and stops by itself.
"""

from __future__ import annotations

import contextlib
import resource
import selectors
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from reportgen.output.serve import SiteServer, make_server, url_of

INDEX = b"<!doctype html><title>site</title>" + b"x" * 3000


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    (site / "index.html").write_bytes(INDEX)
    (site / "sub" / "data.csv").write_text("a,b\n1,2\n")
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_text("secret")
    (outside / "dir" / "index.html").write_text("secret page")
    (site / "leak").symlink_to(outside / "secret.txt")
    (site / "leakdir").symlink_to(outside / "dir")
    (site / "linked").mkdir()
    (site / "linked" / "index.html").symlink_to(outside / "dir" / "index.html")
    (site / "inner.html").symlink_to(site / "index.html")  # a link that stays inside is fine
    return site


@contextlib.contextmanager
def running(server: SiteServer) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_nothing_outside_the_site_and_no_listings(site: Path) -> None:
    with running(make_server(site, port=0)) as base:
        assert status_of(base + "index.html") == 200
        assert status_of(base + "inner.html") == 200
        assert status_of(base + "sub/data.csv") == 200
        for path in ("leak", "leakdir/index.html", "leakdir/", "linked/", "linked/index.html",
                     "sub/", "sub", "../outside/secret.txt", "%2e%2e/outside/secret.txt"):
            assert status_of(base + path) in (301, 404), path
        # A folder without an index is redirected to its slash form, which is not listed either.
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(base + "sub", timeout=10)
        assert answer.value.code == 404
        assert b"data.csv" not in answer.value.read()


def test_slow_connections_are_timed_out_while_others_are_answered(site: Path) -> None:
    server = make_server(site, port=0, header_timeout=2.0, workers=4)
    host, port = server.server_address[:2]
    slow: list[socket.socket] = []
    try:
        with running(server) as base:
            # Slowloris: each connection sends part of a head and then nothing.
            for _ in range(200):
                conn = socket.create_connection((host, port), timeout=10)
                conn.sendall(b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                slow.append(conn)
            with urllib.request.urlopen(base + "index.html", timeout=10) as answer:
                assert answer.read() == INDEX
            # The server, not the client, ends each one: 408 once its head is overdue.
            answers = set()
            for conn in slow:
                conn.settimeout(15)
                answers.add(conn.recv(64).split(b"\r\n")[0])
            assert answers == {b"HTTP/1.0 408 Request Timeout"}
    finally:
        for conn in slow:
            conn.close()


def raise_descriptor_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"needs {wanted} file descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def test_500_concurrent_requests_are_all_answered_or_refused(site: Path) -> None:
    raise_descriptor_limit(2048)
    count = 500
    with running(make_server(site, port=0)) as base:
        host, port = base.removeprefix("http://").rstrip("/").rsplit(":", 1)
        selector = selectors.DefaultSelector()
        replies: dict[int, bytearray] = {}
        for i in range(count):
            conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            conn.setblocking(False)
            conn.connect_ex((host, int(port)))
            selector.register(conn, selectors.EVENT_WRITE, i)
        deadline = time.monotonic() + 60
        open_count = count
        while open_count and time.monotonic() < deadline:
            for key, events in selector.select(1.0):
                conn = key.fileobj
                assert isinstance(conn, socket.socket)
                if events & selectors.EVENT_WRITE:
                    conn.sendall(b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    selector.modify(conn, selectors.EVENT_READ, key.data)
                    replies[key.data] = bytearray()
                    continue
                try:
                    data = conn.recv(65536)
                except ConnectionError:
                    data = b""
                if data:
                    replies[key.data] += data
                else:
                    selector.unregister(conn)
                    conn.close()
                    open_count -= 1
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()
    assert open_count == 0, f"{open_count} of {count} requests got no complete answer in 60 s"
    statuses = {bytes(reply.split(b"\r\n")[0]) for reply in replies.values()}
    assert statuses <= {b"HTTP/1.0 200 OK", b"HTTP/1.0 503 Service Unavailable"}, statuses
    served = [reply for reply in replies.values() if reply.startswith(b"HTTP/1.0 200")]
    assert served and all(reply.endswith(INDEX) for reply in served)


def test_the_log_escapes_control_characters(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = make_server(site, port=0)
    host, port = server.server_address[:2]
    with running(server):
        with socket.create_connection((host, port), timeout=10) as conn:
            conn.sendall(b"GET /\x1b[2J\x1b]0;owned\x07\x9b31m HTTP/1.0\r\n\r\n")
            while conn.recv(65536):
                pass
    err = capsys.readouterr().err
    assert "404" in err
    assert not any(ch in err.replace("\n", "") for ch in "\x1b\x07\x9b")
    assert "\\x1b[2J\\x1b]0;owned\\x07\\x9b31m" in err
