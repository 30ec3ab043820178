"""`reportgen serve`: look at a built site over http on this machine.

A site opens from disk too, but some features need http: "Open in Perfetto
UI" hands the trace to the Perfetto tab by postMessage, which browsers refuse
to pages opened from file://. It binds to the loopback interface unless told
otherwise.

The standard library's request handler answers each request, but not its
thread-per-connection server: a client that opens connections and never
finishes a request would hold a thread each, without limit. Here one thread
reads every request head without blocking, within `header_timeout`, and only
a complete head goes to the bounded pool of workers (`workers` threads, a
queue of `queue` heads); a request past those limits is answered 503 and
closed, never left hanging. A file is served only when its real path (every
symlink followed) lies inside the site, and folders are never listed.
"""

from __future__ import annotations

import email.utils
import io
import os
import queue
import re
import resource
import selectors
import signal
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import BinaryIO, TextIO
from urllib.parse import unquote, urlsplit

from reportgen.output.web_types import content_type

DEFAULT_PORT = 8000
DEFAULT_BIND = "127.0.0.1"
# Linux caps a listen queue at net.core.somaxconn (4096 by default): ask for
# enough that a burst of a browser's or a load test's connections waits in
# the kernel instead of being dropped (the standard library asks for 5).
LISTEN_BACKLOG = 4096
HEADER_TIMEOUT = 10.0  # seconds for a whole request head to arrive
IO_TIMEOUT = 20.0  # seconds any one send may wait on the client
RESPONSE_TIMEOUT = 300.0  # seconds a whole response may take (a slow reader of a large trace)
WORKERS = 16
QUEUE = 1024  # complete heads waiting for a worker: each holds a socket only
MAX_HEAD = 64 * 1024  # the standard library's own limit on one header line

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with control characters written as escapes, so a request cannot drive the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text.replace("\\", "\\\\"))


def _canned(status: HTTPStatus) -> bytes:
    body = f"{status.value} {status.phrase}\n".encode()
    return (f"HTTP/1.0 {status.value} {status.phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


class SiteRequestHandler(SimpleHTTPRequestHandler):
    """Static files with the site's media types; never cached, so a rebuild shows at once.

    `request` is the pair (socket, request head) the server's reading thread
    collected: the handler reads the head from memory and answers on the socket.
    """

    server: SiteServer

    def setup(self) -> None:
        self.connection, head = self.request
        self.rfile = io.BytesIO(head)
        self.wfile = self.connection.makefile("wb")

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        return content_type(str(path))

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        sys.stderr.write(f"{self.address_string()} {printable(format % args)}\n")

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")
        return None

    def _inside(self, path: str) -> str | None:
        """The real path of `path` when it lies inside the site, else None (a symlink out, a missing file)."""
        real = os.path.realpath(path)
        root = self.server.root
        return real if real == root or real.startswith(root + os.sep) else None

    def send_head(self) -> BinaryIO | None:
        # A path the file system cannot take (a NUL byte from %00, one too long) is a bad request, not a crash.
        if "\x00" in unquote(self.path):
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad request path")
            return None
        try:
            return self._open()
        except (OSError, ValueError):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None

    def _open(self) -> BinaryIO | None:
        real = self._inside(self.translate_path(self.path))
        if real is not None and os.path.isdir(real):
            path = urlsplit(self.path).path
            if not path.endswith("/"):
                self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                self.send_header("Location", path + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            real = self._inside(os.path.join(real, "index.html"))
        if real is None or not os.path.isfile(real):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        file = open(real, "rb")  # noqa: SIM115 (closed by the base class after copyfile)
        try:
            size = os.fstat(file.fileno())
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", self.guess_type(real))
            self.send_header("Content-Length", str(size.st_size))
            self.send_header("Last-Modified", email.utils.formatdate(size.st_mtime, usegmt=True))
            self.end_headers()
        except BaseException:
            file.close()
            raise
        return file

    def copyfile(self, source: BinaryIO, outputfile: BinaryIO) -> None:
        # Each send waits at most IO_TIMEOUT; the whole response at most RESPONSE_TIMEOUT, so a
        # client reading a byte now and then cannot hold a worker for ever.
        deadline = time.monotonic() + self.server.response_timeout
        while chunk := source.read(256 * 1024):
            if time.monotonic() > deadline:
                raise TimeoutError("the client read the response too slowly")
            outputfile.write(chunk)


class SiteServer:
    """The site on `address`: one thread reads request heads, `workers` threads answer them."""

    def __init__(self, site_dir: Path, address: tuple[str, int], *, workers: int = WORKERS,
                 queue_size: int = QUEUE, header_timeout: float = HEADER_TIMEOUT,
                 io_timeout: float = IO_TIMEOUT, response_timeout: float = RESPONSE_TIMEOUT) -> None:
        self.root = os.path.realpath(site_dir)
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.socket = socket.create_server(address, family=family, backlog=LISTEN_BACKLOG)
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self.workers = workers
        self.header_timeout = header_timeout
        self.io_timeout = io_timeout
        self.response_timeout = response_timeout
        # Connections sending their head and heads waiting for a worker each hold a descriptor: together they
        # stay well within the process's limit (1024 by default on Linux).
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        descriptors = 8192 if soft == resource.RLIM_INFINITY else soft
        queue_size = max(16, min(queue_size, descriptors // 4))
        self.max_pending = max(16, min(4096, descriptors - 64 - workers - queue_size))
        self._queue: queue.Queue[tuple[socket.socket, tuple, bytes] | None] = queue.Queue(queue_size)
        self._paused_until = 0.0  # accepting paused after running out of descriptors
        self._wake_read, self._wake_write = socket.socketpair()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()

    # The reading thread ----------------------------------------------------------------------------------------

    def serve_forever(self) -> None:
        self._stop.clear()
        self._stopped.clear()
        threads = [threading.Thread(target=self._work, name=f"serve-worker-{i}", daemon=True)
                   for i in range(self.workers)]
        for thread in threads:
            thread.start()
        selector = selectors.DefaultSelector()
        selector.register(self.socket, selectors.EVENT_READ, "listen")
        selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        # Insertion order is arrival order, hence deadline order: expired heads are always at the front.
        pending: dict[socket.socket, tuple[float, tuple, bytearray]] = {}
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if self._paused_until and now >= self._paused_until:
                    self._paused_until = 0.0
                    selector.register(self.socket, selectors.EVENT_READ, "listen")
                timeout = (next(iter(pending.values()))[0] - now) if pending else None
                if self._paused_until:
                    timeout = min(timeout, self._paused_until - now) if timeout is not None else \
                        self._paused_until - now
                for key, _events in selector.select(None if timeout is None else max(0.0, timeout)):
                    if key.data == "listen":
                        self._accept(selector, pending)
                    elif key.data == "wake":
                        self._wake_read.recv(4096)
                    else:
                        self._read(key.fileobj, selector, pending)  # type: ignore[arg-type]
                now = time.monotonic()
                while pending:
                    conn, (deadline, _address, _head) = next(iter(pending.items()))
                    if deadline > now:
                        break
                    self._refuse(conn, selector, pending, HTTPStatus.REQUEST_TIMEOUT)
        finally:
            for conn in list(pending):
                self._drop(conn, selector, pending)
            selector.close()
            for _thread in threads:
                try:
                    self._queue.put_nowait(None)
                except queue.Full:
                    break  # daemon threads: they end with the process
            self._stopped.set()

    def _accept(self, selector: selectors.BaseSelector, pending: dict) -> None:
        for _ in range(256):  # a burst at a time, so reading never starves
            try:
                conn, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors: the kernel keeps the rest queued meanwhile
                sys.stderr.write(f"reportgen: cannot accept a connection ({exc.strerror or exc}); "
                                 "pausing for half a second\n")
                selector.unregister(self.socket)  # else the loop would spin on the ready listener
                self._paused_until = time.monotonic() + 0.5
                return
            conn.setblocking(False)
            if len(pending) >= self.max_pending:
                self._answer_now(conn, HTTPStatus.SERVICE_UNAVAILABLE)
                continue
            pending[conn] = (time.monotonic() + self.header_timeout, address, bytearray())
            selector.register(conn, selectors.EVENT_READ, "client")

    def _read(self, conn: socket.socket, selector: selectors.BaseSelector, pending: dict) -> None:
        deadline, address, head = pending[conn]
        try:
            data = conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn, selector, pending)
            return
        head += data
        if b"\r\n\r\n" not in head and b"\n\n" not in head:
            if len(head) > MAX_HEAD:
                self._refuse(conn, selector, pending, HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            return
        selector.unregister(conn)
        del pending[conn]
        conn.setblocking(True)
        conn.settimeout(self.io_timeout)
        try:
            self._queue.put_nowait((conn, address, bytes(head)))
        except queue.Full:
            self._answer_now(conn, HTTPStatus.SERVICE_UNAVAILABLE)

    def _refuse(self, conn: socket.socket, selector: selectors.BaseSelector, pending: dict,
                status: HTTPStatus) -> None:
        selector.unregister(conn)
        del pending[conn]
        self._answer_now(conn, status)

    def _drop(self, conn: socket.socket, selector: selectors.BaseSelector, pending: dict) -> None:
        selector.unregister(conn)
        del pending[conn]
        conn.close()

    @staticmethod
    def _answer_now(conn: socket.socket, status: HTTPStatus) -> None:
        """A short answer without waiting: it fits in the socket's buffer, or the client is gone anyway."""
        try:
            conn.setblocking(False)
            conn.send(_canned(status))
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        conn.close()

    # The workers -----------------------------------------------------------------------------------------------

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            conn, address, head = item
            try:
                SiteRequestHandler((conn, head), address, self, directory=self.root)  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 (one line per failed request, the server goes on)
                kind, exc = sys.exc_info()[:2]
                name = kind.__name__ if kind else "error"
                sys.stderr.write(f"reportgen: a request from {address[0]} failed ({name}: {printable(str(exc))})\n")
            finally:
                try:
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                conn.close()

    # Control ---------------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop `serve_forever` (from another thread) and wait until it has returned."""
        self._stop.set()
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass
        self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()
        self._wake_read.close()
        self._wake_write.close()


def make_server(site_dir: Path, port: int = DEFAULT_PORT, bind: str = DEFAULT_BIND, **limits: float) -> SiteServer:
    return SiteServer(site_dir, (bind, port), **limits)  # type: ignore[arg-type]


def url_of(server: SiteServer) -> str:
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in str(host) else host
    return f"http://{shown}:{port}/"


def _stop_on_sigterm(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def serve(site_dir: Path, port: int = DEFAULT_PORT, bind: str = DEFAULT_BIND, out: TextIO = sys.stdout) -> None:
    """Serve until Ctrl-C (or SIGTERM), then return normally."""
    server = make_server(site_dir, port, bind)
    # Ctrl-C must stop the server even when started from a shell that ignores SIGINT for background jobs.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous_term = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        print(f"reportgen: serving {site_dir} at {url_of(server)}index.html (Ctrl-C to stop)", file=out, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("reportgen: stopped", file=out, flush=True)
    finally:
        server.server_close()
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
