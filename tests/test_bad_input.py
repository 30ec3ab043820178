"""Bad input never takes the good input down, and never destroys a site.

One logdir holds every kind of bad host file, each in its own run next to a
good host, plus a run of good hosts only; `python -m reportgen build` runs
once over it as a subprocess. Each bad file must be named with its problem
on stderr, on its run page, on the site index and in summary.json, the good
hosts and runs must be built, and the exit status must be 2.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from reportgen.cli import main as cli
from reportgen.loaders.proto import xplane_pb2 as pb
from tests.clirun import reportgen, unreadable_file_runner
from tests.conftest import REPO
from tests.sitecheck import assert_links_resolve, html_pages

GOOD = (REPO / "reportgen/sample/plugins/profile/tf_keras_fast/vm.xplane.pb").read_bytes()


@dataclass(frozen=True)
class Case:
    filename: str
    content: bytes
    problem: str  # regular expression the message must match


CASES = {
    "empty": Case("bad.xplane.pb", b"", r"is empty \(0 bytes\)"),
    "truncated": Case("bad.xplane.pb", GOOD[: len(GOOD) // 2], r"truncated"),
    "random_bytes": Case("bad.xplane.pb", random.Random(20240611).randbytes(4096), r"not an XSpace protobuf"),
    "gz_not_gzip": Case("bad.xplane.pb.gz", GOOD, r"named \.gz but is not gzip data"),
    "gz_truncated": Case("bad.xplane.pb.gz", gzip.compress(GOOD)[:5000], r"gzip data is corrupt or truncated"),
    "json": Case("bad.xplane.pb", json.dumps({"displayTimeUnit": "ns", "traceEvents": []}).encode(),
                 r"looks like JSON, not an XSpace protobuf"),
    "unreadable": Case("bad.xplane.pb", GOOD, r"cannot be read \(Permission denied\)"),
}


@dataclass
class BadBuild:
    logdir: Path
    out: Path
    rc: int
    stderr: str
    stdout: str
    bad_paths: dict[str, Path]
    skipped: dict[str, str]  # case -> why it could not be set up here

    @property
    def summary(self) -> dict:
        return json.loads((self.out / "summary.json").read_text())

    def page_text(self, relative: str) -> str:
        return html.unescape((self.out / relative).read_text())


@pytest.fixture(scope="module")
def bad_build(tmp_path_factory) -> BadBuild:
    root = tmp_path_factory.mktemp("bad")
    profile = root / "logdir" / "plugins" / "profile"
    bad_paths, skipped = {}, {}
    preexec = None
    for name, case in CASES.items():
        run = profile / f"bad_{name}"
        run.mkdir(parents=True)
        (run / "good.xplane.pb").write_bytes(GOOD)
        bad = run / case.filename
        bad.write_bytes(case.content)
        if name == "unreadable":
            preexec, reason = unreadable_file_runner(bad)
            if reason:
                skipped[name] = reason
                bad.unlink()
                continue
        bad_paths[name] = bad
    (profile / "only_bad").mkdir()
    (profile / "only_bad" / "only.xplane.pb").write_bytes(b"")
    (profile / "zz_good").mkdir()
    for host in ("a", "b"):
        (profile / "zz_good" / f"{host}.xplane.pb").write_bytes(GOOD)
    out = root / "site"
    proc = reportgen("build", str(root / "logdir"), "-o", str(out), "--jobs", "2", preexec_fn=preexec)
    return BadBuild(root / "logdir", out, proc.returncode, proc.stderr, proc.stdout, bad_paths, skipped)


def test_partial_build_exits_2_and_builds_the_good_input(bad_build):
    assert bad_build.rc == 2, bad_build.stderr
    summary = bad_build.summary
    for name in bad_build.bad_paths:
        assert summary["runs"][f"bad_{name}"]["hosts"] == ["good"]
        assert "data-vega-spec" in bad_build.page_text(f"bad_{name}/index.html")
    assert summary["runs"]["zz_good"]["hosts"] == ["a", "b"]
    assert summary["runs"]["zz_good"]["errors"] == []
    assert summary["runs"]["only_bad"]["hosts"] == []
    # Every bad_* run has its good host (the unreadable case's too, when skipped).
    assert summary["hosts"] == len(CASES) + 2
    # The one-line summary still reports what was built, and how many inputs failed.
    assert re.search(rf"{len(CASES) + 2} runs, {len(CASES) + 2} hosts", bad_build.stdout)
    assert f"{len(bad_build.bad_paths) + 1} inputs could not be read" in bad_build.stdout


def test_run_whose_every_host_is_bad_still_has_a_page(bad_build):
    text = bad_build.page_text("only_bad/index.html")
    assert "only_bad/only.xplane.pb" in text and str(bad_build.logdir) not in text
    assert "is empty" in text


@pytest.mark.parametrize("name", list(CASES))
def test_bad_file_is_named_with_its_problem(bad_build, name):
    if name in bad_build.skipped:
        pytest.skip(bad_build.skipped[name])
    path = str(bad_build.bad_paths[name])
    problem = re.compile(CASES[name].problem)
    # stderr: one line per bad input, with the path as the user gave it
    lines = [line for line in bad_build.stderr.splitlines() if path in line]
    assert len(lines) == 1 and problem.search(lines[0]), bad_build.stderr
    # The site is shared: it names the file relative to the logdir, never by
    # the build machine's absolute path.
    path = f"bad_{name}/{bad_build.bad_paths[name].name}"
    # summary.json: the run's errors and the site-wide list
    run = bad_build.summary["runs"][f"bad_{name}"]
    assert [e["path"] for e in run["errors"]] == [path]
    assert problem.search(run["errors"][0]["message"]) and path in run["errors"][0]["message"]
    assert any(e["path"] == path and e["run"] == f"bad_{name}" for e in bad_build.summary["errors"])
    # the run page and the site index
    for page in (f"bad_{name}/index.html", "index.html"):
        text = bad_build.page_text(page)
        assert path in text and problem.search(text), page
        assert f"{path}</code>: {path}" not in text, "the file is named once, beside its problem"


def test_partial_site_links_resolve(bad_build):
    assert_links_resolve(bad_build.out)


def test_no_captures_exits_1_saying_where_it_looked(tmp_path):
    empty = tmp_path / "empty_logdir"
    (empty / "plugins" / "profile" / "run").mkdir(parents=True)
    (empty / "plugins" / "profile" / "run" / "notes.txt").write_text("no captures here")
    out = tmp_path / "site"
    proc = reportgen("build", str(empty), "-o", str(out))
    assert proc.returncode == 1
    assert "no captures" in proc.stderr and str(empty / "plugins" / "profile") in proc.stderr
    assert proc.stdout == ""
    assert not out.exists()
    assert not list(tmp_path.glob(".site*"))  # no temporary folder left behind


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def previous_site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("previous") / "site"
    assert cli.main(["build", "-q", "-o", str(out), "--runs", "tf_keras_fast", "--jobs", "1"]) == 0
    return out


def test_failed_build_leaves_previous_site_untouched(previous_site, tmp_path, capsys):
    before = _snapshot(previous_site)
    assert len(before) > 3
    all_bad = tmp_path / "all_bad" / "plugins" / "profile" / "r"
    all_bad.mkdir(parents=True)
    (all_bad / "a.xplane.pb").write_bytes(b"")
    (all_bad / "b.xplane.pb").write_bytes(b"[1, 2]")
    assert cli.main(["build", str(tmp_path / "all_bad"), "-o", str(previous_site), "--jobs", "1"]) == 1
    err = capsys.readouterr().err
    assert str(all_bad / "a.xplane.pb") in err and str(all_bad / "b.xplane.pb") in err
    assert cli.main(["build", str(tmp_path / "nothing"), "-o", str(previous_site)]) == 1
    assert "no such file or directory" in capsys.readouterr().err
    assert _snapshot(previous_site) == before
    # No temporary folders left; the rebuild cache of the first (good) build and the site's lock file stay
    # beside it.
    assert sorted(p.name for p in previous_site.parent.iterdir()) == [".site.lock", ".site.reportgen-cache", "site"]


def test_output_that_is_not_a_site_is_refused(tmp_path, capsys):
    mine = tmp_path / "my_documents"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    (mine / "summary.json").write_text(json.dumps({"generator": "something else"}))
    before = _snapshot(mine)
    assert cli.main(["build", "-o", str(mine)]) == 1
    err = capsys.readouterr().err
    assert str(mine) in err and "not a reportgen site" in err
    assert _snapshot(mine) == before
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    assert cli.main(["build", "-o", str(a_file)]) == 1
    assert a_file.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_documents", "notes.txt"]


HOSTILE = '<script>alert(1)</script>"\'&'
HOSTILE_FILENAME = '<script>alert(1)<"x\'&'  # no '/' in a file name


def _hostile_space() -> bytes:
    space = pb.XSpace(hostnames=[HOSTILE], errors=[HOSTILE], warnings=[HOSTILE])
    plane = space.planes.add(id=1, name="/host:CPU" + HOSTILE)
    plane.stat_metadata[1].name = HOSTILE
    plane.event_metadata[1].name = HOSTILE
    plane.event_metadata[1].display_name = HOSTILE
    line = plane.lines.add(id=1, name=HOSTILE, display_name=HOSTILE, timestamp_ns=1000)
    for i in range(5):
        event = line.events.add(metadata_id=1, offset_ps=i * 1_000_000, duration_ps=500_000)
        event.stats.add(metadata_id=1, str_value=HOSTILE)
    other = space.planes.add(id=2, name=HOSTILE)  # a plane without lines is listed by name
    other.stats.add(metadata_id=1, str_value=HOSTILE)
    return space.SerializeToString()


def test_capture_strings_are_escaped(tmp_path, capsys):
    run = tmp_path / "logdir" / "plugins" / "profile" / ("run" + HOSTILE_FILENAME)
    run.mkdir(parents=True)
    (run / f"{HOSTILE_FILENAME}.xplane.pb").write_bytes(_hostile_space())
    (run / f"bad{HOSTILE_FILENAME}.xplane.pb").write_bytes(b"")  # its error message holds the name too
    out = tmp_path / "site"
    assert cli.main(["build", str(tmp_path / "logdir"), "-o", str(out), "--jobs", "1"]) == 2
    capsys.readouterr()
    pages = html_pages(out)
    assert len(pages) >= 2
    for page in pages:
        raw = page.read_text()
        assert "<script>alert" not in raw, page
    run_page = out / run.name / "index.html"
    assert run_page.exists()
    text = _visible_text(run_page)
    for shown in (HOSTILE, HOSTILE_FILENAME, "run" + HOSTILE_FILENAME, "/host:CPU" + HOSTILE):
        assert shown in text, shown
    assert "run" + HOSTILE_FILENAME in _visible_text(out / "index.html")
    assert_links_resolve(out)


def _visible_text(page: Path) -> str:
    """The page's text as a browser shows it (outside script elements)."""
    from html.parser import HTMLParser

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []
            self.in_script = 0

        def handle_starttag(self, tag, attrs):
            self.in_script += tag == "script"

        def handle_endtag(self, tag):
            self.in_script -= tag == "script"

        def handle_data(self, data):
            if not self.in_script:
                self.parts.append(data)

    parser = Text()
    parser.feed(page.read_text())
    return "\n".join(parser.parts)
