"""Publishing to GCS, against a real local emulator (gcp-storage-emulator) on a loopback port."""

from __future__ import annotations

import os
import posixpath
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from reportgen.cli.main import main
from reportgen.output.publish import PublishError, gcs_filesystem, publish_site
from reportgen.output.transaction import MARKER
from reportgen.output.web_types import IMMUTABLE, REVALIDATE, SHORT
from tests.builtsite import XSS_RUN, built_site, make_logdir
from tests.conftest import GCS_BUCKET as BUCKET
from tests.htmlscan import scan_html

REPO = Path(__file__).resolve().parent.parent

pytest.importorskip("gcp_storage_emulator", reason="pip install gcp-storage-emulator (the `test` extra)")


@pytest.fixture(scope="module")
def fs(gcs_emulator):
    return gcs_filesystem(gcs_emulator)


@pytest.fixture(scope="module")
def built():
    return built_site()


@pytest.fixture(scope="module")
def published(built, fs):
    report = publish_site(built.site, f"gs://{BUCKET}/team/site", fs=fs, jobs=4)
    fs.invalidate_cache()
    return report


def _objects(fs, prefix: str) -> dict[str, dict]:
    fs.invalidate_cache()
    root = f"{BUCKET}/{prefix}/"
    return {path[len(root):]: fs.info(path) for path in fs.find(root)}


def test_every_file_becomes_an_object_with_its_type_and_cache_policy(built, fs, published):
    objects = _objects(fs, "team/site")
    local = sorted(p.relative_to(built.site).as_posix() for p in built.site.rglob("*")
                   if p.is_file() and p.name != MARKER)  # the folder's marker stays local
    assert sorted(objects) == local
    assert published.objects == len(local)
    for name, info in objects.items():
        assert int(info["size"]) == (built.site / name).stat().st_size, name
        assert fs.cat(f"{BUCKET}/team/site/{name}") == (built.site / name).read_bytes()
    expected_types = {".html": "text/html; charset=utf-8", ".json": "application/json",
                      ".csv": "text/csv; charset=utf-8", ".js": "application/javascript", ".css": "text/css",
                      ".gz": "application/gzip",  # trace chunks (.json.gz), stored as they are
                      ".txt": "text/plain; charset=utf-8"}  # vendored components' licences
    for name, info in objects.items():
        assert info["contentType"] == expected_types[Path(name).suffix], name
        if name.startswith("assets/"):
            assert info["cacheControl"] == IMMUTABLE, name
        elif name in ("index.html", "summary.json"):
            assert info["cacheControl"] == REVALIDATE
        else:
            assert info["cacheControl"] == SHORT, name


def test_index_pages_and_summary_go_out_last(fs, published):
    order = published.order
    assert order[-2:] == ["index.html", "summary.json"]
    run_indexes = [i for i, name in enumerate(order) if name.endswith("/index.html")]
    others = [i for i, name in enumerate(order) if not name.endswith("index.html") and name != "summary.json"]
    assert run_indexes and others and max(others) < min(run_indexes)
    # The storage side agrees: the entry points were created after every other object.
    created = {name: info["timeCreated"] for name, info in _objects(fs, "team/site").items()}
    rest = [t for name, t in created.items() if name not in ("index.html", "summary.json")]
    assert max(rest) <= created["index.html"] <= created["summary.json"]


def test_published_links_resolve_to_objects(fs, published):
    objects = set(_objects(fs, "team/site"))
    pages = [name for name in objects if name.endswith("index.html")]
    assert "index.html" in pages and f"{XSS_RUN}/index.html" in pages
    checked = 0
    for page in pages:
        text = fs.cat(f"{BUCKET}/team/site/{page}").decode("utf-8")
        for _tag, _attribute, value in scan_html(text).links:
            parts = urlsplit(value)
            if parts.scheme or value.startswith("//") or not parts.path:
                continue  # external, data: or a fragment of the same page
            target = posixpath.normpath(posixpath.join(posixpath.dirname(page), unquote(parts.path)))
            assert target in objects, f"{page} links to missing {target}"
            checked += 1
    assert checked > 10


def test_republish_replaces_the_site_and_deletes_stale_objects(built, fs, published):
    fs.pipe(f"{BUCKET}/team/site/old-run/index.html", b"<p>old</p>")
    report = publish_site(built.site, f"gs://{BUCKET}/team/site/", fs=fs)
    assert report.deleted == 1
    assert "old-run/index.html" not in _objects(fs, "team/site")


def test_a_prefix_holding_other_files_is_refused(built, fs):
    fs.pipe(f"{BUCKET}/someone/else/notes.txt", b"keep me")
    with pytest.raises(PublishError, match="not a reportgen site"):
        publish_site(built.site, f"gs://{BUCKET}/someone/else", fs=fs)
    assert list(_objects(fs, "someone/else")) == ["notes.txt"]


def test_publish_command_uses_the_emulator_from_the_environment(built, gcs_emulator, fs, monkeypatch, capsys):
    emulator = gcs_emulator
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.removeprefix("http://"))
    assert main(["publish", str(built.site), f"gs://{BUCKET}/cli"]) == 0
    assert "published" in capsys.readouterr().out
    assert "summary.json" in _objects(fs, "cli")
    assert main(["publish", str(built.logdir), f"gs://{BUCKET}/cli2"]) == 1
    assert "not a site built by reportgen" in capsys.readouterr().err


def test_build_straight_to_gcs(tmp_path, gcs_emulator, fs, monkeypatch, capsys):
    emulator = gcs_emulator
    logdir = make_logdir(tmp_path)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator)
    code = main(["build", str(logdir / "plugins" / "profile" / XSS_RUN), "-o", f"gs://{BUCKET}/built", "-q",
                 "--jobs", "1"])
    assert code == 2  # the corrupt host file
    objects = _objects(fs, "built")
    assert "index.html" in objects and "summary.json" in objects
    assert objects["index.html"]["contentType"] == "text/html; charset=utf-8"
    assert not (Path.cwd() / "gs:").exists()


def test_missing_credentials_say_what_to_do(built, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG")}
    # An empty home (no gcloud sign-in) and no metadata server probe (not on Google Cloud).
    env.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), NO_GCE_CHECK="true",
               PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-m", "reportgen", "publish", str(built.site), f"gs://{BUCKET}/x"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1
    assert "no Google Cloud credentials found" in result.stderr
    assert "gcloud auth application-default login" in result.stderr
    assert "GOOGLE_APPLICATION_CREDENTIALS" in result.stderr
    assert "Traceback" not in result.stderr


def test_unusable_credentials_stop_a_build_before_it_starts(built, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing-key.json"))
    assert main(["publish", str(built.site), f"gs://{BUCKET}/x"]) == 1
    err = capsys.readouterr().err
    assert "no Google Cloud credentials found" in err and "missing-key.json" in err
    assert main(["build", str(built.logdir), "-o", f"gs://{BUCKET}/x"]) == 1
    captured = capsys.readouterr()
    assert "no Google Cloud credentials found" in captured.err
    assert captured.out == ""  # no build summary: it never ran


def test_bad_destinations_are_refused(built):
    for url in ("s3://bucket/x", "gs://", "gs://bucket/../x"):
        with pytest.raises(PublishError):
            publish_site(built.site, url)




def _answering(status: int) -> tuple[object, str]:
    """A local http server that answers every request with `status` (and a JSON error body), as an object
    store that refuses: its endpoint URL."""
    import http.server
    import threading

    class Refuse(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            body = b'{"error": {"code": %d, "message": "refused by the test"}}' % status
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"127.0.0.1:{server.server_address[1]}"


def _publish_command(built, endpoint: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "STORAGE_EMULATOR_HOST": endpoint,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "reportgen", "publish", str(built.site), "gs://bucket/site"],
                          capture_output=True, text=True, env=env, timeout=300)


def test_a_refusing_endpoint_is_one_line(built):
    server, endpoint = _answering(403)
    try:
        proc = _publish_command(built, endpoint)
    finally:
        server.shutdown()
    assert proc.returncode == 1
    assert proc.stderr.startswith("reportgen: gs://bucket/site: ") and len(proc.stderr.strip().splitlines()) == 1, (
        proc.stderr)
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not os.environ.get("REPORTGEN_LARGE_TESTS"), reason="set REPORTGEN_LARGE_TESTS=1: gcsfs "
                    "retries a connection for about 40 s before it gives up")
def test_an_unreachable_endpoint_is_one_line(built):
    proc = _publish_command(built, "127.0.0.1:9")  # the discard port: nothing listens there
    assert proc.returncode == 1
    assert proc.stderr.startswith("reportgen: gs://bucket/site: cannot be read: Cannot connect to host")
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
