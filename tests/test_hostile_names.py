"""Names from captures are text: control sequences, `::` and CI workflow commands in run names reach no
terminal, no CI log and no file system as anything but escaped text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reportgen.pipeline.build import BuildOptions, build_site
from tests.clirun import reportgen
from tests.test_memory_pages import plain_capture

# A newline, a GitHub workflow command and its %0A-encoded newline, and fsspec's URL chaining (`::`).
CONTROL_RUN = "nl\n::error::RUN-NAME-ANNOT%0A::warning::x"
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _logdir(root: Path, runs: list[str]) -> Path:
    for run in runs:
        folder = root / "logdir" / "plugins" / "profile" / run
        folder.mkdir(parents=True)
        (folder / "host.xplane.pb").write_bytes(plain_capture())
    return root / "logdir"


@pytest.fixture(scope="module")
def control_site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("control")
    site = root / "site"
    build_site([str(_logdir(root, [CONTROL_RUN, "ok"]))], BuildOptions(output=str(site), jobs=1, cache=False))
    return site


def _assert_plain_lines(done) -> None:
    """Exit 0, no traceback, and no line that a name started (a raw newline in a name would begin one
    with `::error::`, which a CI runner obeys)."""
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for stream in (done.stdout, done.stderr):
        assert not RAW_CONTROL.search(stream)
        assert not [line for line in stream.splitlines() if line.startswith("::") and "RUN-NAME" in line]


@pytest.mark.parametrize("command", [
    ("summary", "{site}"),
    ("summary", "{site}", "--compare", "ok", CONTROL_RUN),
    ("compare", "{site}:ok", "{site}:" + CONTROL_RUN, "-o", "{tmp}/cmp"),
    ("compare", "{site}:" + CONTROL_RUN, "{site}:ok", "-o", "{tmp}/cmp"),
    ("check", "{site}", "--max-step-ms", "1"),
], ids=["summary", "summary-compare", "compare-to", "compare-from", "check"])
def test_control_sequences_in_a_run_name_are_text_in_every_command(control_site, tmp_path, command):
    args = [a.format(site=control_site, tmp=tmp_path) for a in command]
    done = reportgen(*args, cwd=tmp_path, timeout=120)
    _assert_plain_lines(done)
    out = done.stdout + done.stderr
    if command[0] == "summary":
        assert "RUN\\-NAME\\-ANNOT" in out  # the run is there, as Markdown-escaped text
    else:
        assert "nl\\n::error::RUN-NAME-ANNOT" in out  # the newline written as an escape


def test_a_missing_run_lists_the_others_on_one_line(control_site, tmp_path):
    done = reportgen("compare", f"{control_site}:ok", f"{control_site}:nope", cwd=tmp_path, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "nl\\n::error::" in done.stderr
