"""`reportgen serve`: look at a built site over http on this machine.

A site opens from disk too, but some features need http: "Open in Perfetto
UI" hands the trace to the Perfetto tab by postMessage, which browsers refuse
to pages opened from file://. The standard library server is enough; it binds
to the loopback interface unless told otherwise.
"""

from __future__ import annotations

import signal
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TextIO
from urllib.parse import unquote

from reportgen.output.web_types import content_type

DEFAULT_PORT = 8000
DEFAULT_BIND = "127.0.0.1"


class SiteRequestHandler(SimpleHTTPRequestHandler):
    """Static files with the site's media types; never cached, so a rebuild shows at once."""

    def guess_type(self, path: str | Path) -> str:
        return content_type(str(path))

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def send_head(self):
        # A path the file system cannot take (a NUL byte from %00, one too long) is a bad request, not a crash.
        if "\x00" in unquote(self.path):
            self.send_error(400, "Bad request path")
            return None
        try:
            return super().send_head()
        except (OSError, ValueError):
            self.send_error(404, "File not found")
            return None


class SiteServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """One line instead of the standard library's traceback (a client that went away, a bad request)."""
        kind, exc = sys.exc_info()[:2]
        sys.stderr.write(f"reportgen: a request from {client_address[0]} failed ({kind.__name__}: {exc})\n")


def make_server(site_dir: Path, port: int = DEFAULT_PORT, bind: str = DEFAULT_BIND) -> ThreadingHTTPServer:
    handler = partial(SiteRequestHandler, directory=str(site_dir))
    return SiteServer((bind, port), handler)


def url_of(server: ThreadingHTTPServer) -> str:
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
