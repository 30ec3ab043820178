"""The rebuild cache and the kernel cache are trusted only as far as is safe: folders of this user's
only, entries signed and hashed at write, checked before anything reaches a site."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import reportgen.pipeline.cache as buildcache
from reportgen.pipeline.build import BuildOptions, build_site
from reportgen.user_cache import writable_dir
from tests.conftest import REPO
from tests.logdirs import assert_same_site, make_logdir, site_bytes, small_capture

PLANTED = b'<script>alert("planted")</script>'


def _build(logdir: Path, output: Path, **options):
    lines: list[str] = []
    report = build_site([str(logdir)], BuildOptions(output=str(output), log=lines.append, jobs=1, **options))
    return report, lines


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    logdir = make_logdir(tmp_path / "logdir", {"a": {"h0": small_capture(1), "h1": small_capture(2)},
                                               "b": {"vm": small_capture(3)}})
    report, _ = _build(logdir, tmp_path / "site")
    assert report.exit_code == 0
    fresh, _ = _build(logdir, tmp_path / "fresh", cache=False)
    return logdir, tmp_path / ".site.reportgen-cache"


def _rehash(entry: Path, rel: str) -> None:
    """What a writer of the cache without the user's key can do at best: record the new file's hash."""
    manifest = json.loads((entry / buildcache.MANIFEST).read_bytes())
    manifest["payload"]["files"][rel] = list(buildcache.file_digest(entry / rel))
    (entry / buildcache.MANIFEST).write_text(json.dumps(manifest))


def test_planted_scripts_in_cached_pages_never_reach_the_site(built: tuple[Path, Path], tmp_path: Path) -> None:
    logdir, cache = built
    # By run, not by the entries' (hashed, code-dependent) folder names: run a's host is spoiled, so run a is
    # rebuilt and its run entry never read; run b's entry is read, and its page was rehashed without the key.
    pages = {("a" if b"Run a<" in p.read_bytes() else "b"): p for p in cache.glob("runs/*/files/index.html")}
    assert sorted(pages) == ["a", "b"]
    pages["b"].write_bytes(pages["b"].read_bytes().replace(b"</body>", PLANTED + b"</body>"))
    _rehash(pages["b"].parents[1], "files/index.html")
    pages["a"].write_bytes(pages["a"].read_bytes().replace(b"</body>", PLANTED + b"</body>"))  # hash left as it was
    (pages["a"].parent / "planted.html").write_bytes(PLANTED)  # a file the entry does not list
    host_file = next(p for p in sorted(cache.glob("hosts/*/*/files/a/**/*")) if p.is_file())
    host_file.write_bytes(host_file.read_bytes() + PLANTED)
    report, lines = _build(logdir, tmp_path / "site")
    assert report.exit_code == 0 and report.warnings == []
    assert not [rel for rel, data in site_bytes(tmp_path / "site").items() if PLANTED in data]
    assert_same_site(tmp_path / "site", tmp_path / "fresh")
    ignored = [line for line in lines if "ignoring an unreadable cache entry" in line]
    assert any("not signed with this user's key" in line for line in ignored), lines
    assert any("is not the file the manifest records" in line for line in ignored), lines


def test_truncated_files_in_entries_are_misses_and_rebuilt(built: tuple[Path, Path], tmp_path: Path) -> None:
    logdir, cache = built
    host_files = sorted(p for p in cache.glob("hosts/*/*/files/**/*") if p.is_file() and p.stat().st_size > 1)
    host_files[0].write_bytes(host_files[0].read_bytes()[: host_files[0].stat().st_size // 2])
    host_files[-1].write_bytes(b"")
    run_page = next(cache.glob("runs/*/files/index.html"))
    run_page.write_bytes(run_page.read_bytes()[:100])
    report, lines = _build(logdir, tmp_path / "site")
    assert report.exit_code == 0
    assert len(report.decoded) >= 1
    assert_same_site(tmp_path / "site", tmp_path / "fresh")
    again, _ = _build(logdir, tmp_path / "site")  # the bad entries were written again
    assert again.decoded == [] and len(again.cached) == 3


def test_a_cache_folder_of_ours_is_made_private_one_of_another_user_is_refused(tmp_path: Path) -> None:
    logdir = make_logdir(tmp_path / "logdir", {"a": {"h0": small_capture(1)}})
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    _build(logdir, tmp_path / "one", cache_dir=str(loose))
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
    second, _ = _build(logdir, tmp_path / "one", cache_dir=str(loose))
    assert second.cached == ["a/h0.xplane.pb"]
    if os.geteuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o777)
        os.chmod(foreign, 0o777)
        os.chown(foreign, 65534, 65534)
    else:
        foreign = Path("/tmp")  # root's, writable by all
    report, _ = _build(logdir, tmp_path / "two", cache_dir=str(foreign))
    assert report.exit_code == 0 and report.decoded == ["a/h0.xplane.pb"]
    assert len(report.warnings) == 1 and "\n" not in report.warnings[0]
    assert report.warnings[0].startswith(f"not using the rebuild cache ({foreign}: belongs to another user")
    if os.geteuid() == 0:
        assert list(foreign.iterdir()) == []


def test_the_kernel_cache_folder_gets_the_same_check(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    assert writable_dir(loose) is None and stat.S_IMODE(loose.stat().st_mode) == 0o700
    if os.geteuid() != 0:
        pytest.skip("making a folder of another user needs root")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    os.chmod(foreign, 0o777)
    os.chown(foreign, 65534, 65534)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(foreign), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", "from reportgen import kernels; print(kernels.CACHE_PROBLEM)"],
                          env=env, capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == f"{foreign}: belongs to another user (uid 65534), who could put files in it"
    assert list(foreign.iterdir()) == []


def test_a_forged_fingerprint_memo_is_ignored(built: tuple[Path, Path], tmp_path: Path) -> None:
    """The memo maps a file's stat to its content key: a forged one could point a changed file at the
    entry of its old version. Unsigned or altered, it is ignored and the files are hashed again."""
    logdir, cache = built
    _build(logdir, tmp_path / "site")  # the second build looks the hosts up, and writes the memo
    memo = cache / buildcache.MEMO_FILE
    document = json.loads(memo.read_bytes())
    files = document.get("payload", document)["files"]
    assert files
    for stat_and_key in files.values():
        stat_and_key[1] = "sha256:" + "0" * 64
    memo.write_text(json.dumps(document))
    report, lines = _build(logdir, tmp_path / "site")
    assert any("ignoring the cache's fingerprint memo" in line and "not signed with this user's key" in line
               for line in lines), lines
    assert report.decoded == [] and len(report.cached) == 3
