"""`reportgen serve`: a built site over http on localhost, stopped by Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.builtsite import built_site
from tests.clirun import reportgen

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def built():
    return built_site()


def test_serves_the_site_and_stops_cleanly_on_ctrl_c(built):
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "reportgen", "serve", str(built.site), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert match, line
        base = match.group(1)
        with urllib.request.urlopen(base + "index.html", timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "text/html; charset=utf-8"
            assert response.read() == (built.site / "index.html").read_bytes()
        csv = next(built.site.glob("tf_keras_fast/data/*/*.csv")).relative_to(built.site).as_posix()
        with urllib.request.urlopen(base + csv, timeout=10) as response:
            assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
        with pytest.raises(urllib.error.HTTPError):  # nothing outside the site
            urllib.request.urlopen(base + "../builtsite.py", timeout=10)
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "stopped" in out


def test_refuses_a_folder_that_is_not_a_site(tmp_path):
    from reportgen.cli.main import main

    assert main(["serve", str(tmp_path)]) == 1


def test_command_line_exit_codes_match_the_build():
    from reportgen.cli import common as cli
    from reportgen.pipeline import build

    assert (cli.EXIT_OK, cli.EXIT_FAILED) == (build.EXIT_OK, build.EXIT_FAILED)


def test_bad_requests_and_ports_are_one_line(built):
    from reportgen.output.serve import make_server, url_of

    server = make_server(built.site, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for path, code in (("%00", 400), ("index.html%00.js", 400), ("a" * 5000, 404), ("../../etc/passwd", 404)):
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(url_of(server) + path, timeout=10)
            assert answer.value.code == code
        with urllib.request.urlopen(url_of(server) + "index.html", timeout=10) as page:
            assert page.status == 200
    finally:
        server.shutdown()
        server.server_close()
    for port in ("70000", "-1"):
        proc = reportgen("serve", str(built.site), "--port", port)
        assert proc.returncode == 1 and proc.stderr == (
            f"reportgen: --port {port}: a port is a number from 0 to 65535 (0 picks a free one)\n")
