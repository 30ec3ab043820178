"""Names from captures are text: control sequences, `::` and CI workflow commands in run names reach no
terminal, no CI log and no file system as anything but escaped text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reportgen.cli.main import main
from reportgen.pipeline.build import BuildOptions, build_site
from tests.clirun import reportgen
from tests.test_memory_pages import plain_capture
from tests.xspace import Space, memory_event

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
    """A site with the run CONTROL_RUN under that very name, as reportgen wrote it before run folders were
    made by reportgen/names.py (or as a hostile summary.json names it): its pages stay in its folder."""
    root = tmp_path_factory.mktemp("control")
    site = root / "site"
    build_site([str(_logdir(root, [CONTROL_RUN, "ok"]))], BuildOptions(output=str(site), jobs=1, cache=False))
    doc = json.loads((site / "summary.json").read_text())
    (built,) = [name for name in doc["runs"] if name != "ok"]
    (site / "built-name").write_text(built)
    doc["runs"] = {CONTROL_RUN if name == built else name: block for name, block in doc["runs"].items()}
    (site / "summary.json").write_text(json.dumps(doc))
    return site


def test_the_build_names_a_control_run_without_its_control_characters(control_site):
    built = (control_site / "built-name").read_text()
    assert built.startswith("nl_::error::RUN-NAME-ANNOT%0A::warning::x~")  # readable, and unique by its hash
    assert (control_site / built / "index.html").is_file()


def _assert_plain_lines(code: int, out: str, err: str) -> None:
    """Exit 0 and no line that a name started (a raw newline in a name would begin one with
    `::error::`, which a CI runner obeys)."""
    assert code == 0, err
    for stream in (out, err):
        assert not RAW_CONTROL.search(stream)
        assert not [line for line in stream.splitlines() if line.startswith("::") and "RUN-NAME" in line]


@pytest.mark.parametrize("command", [
    ("summary", "{site}"),
    ("summary", "{site}", "--compare", "ok", CONTROL_RUN),
    ("compare", "{site}:ok", "{site}:" + CONTROL_RUN, "-o", "{tmp}/cmp"),
    ("compare", "{site}:" + CONTROL_RUN, "{site}:ok", "-o", "{tmp}/cmp"),
    ("check", "{site}", "--max-step-ms", "1"),
], ids=["summary", "summary-compare", "compare-to", "compare-from", "check"])
def test_control_sequences_in_a_run_name_are_text_in_every_command(control_site, tmp_path, capsys, command):
    # In this process: a ValueError from fsspec (`Protocol not known: warning`) fails the test as it is.
    code = main([a.format(site=control_site, tmp=tmp_path) for a in command])
    out, err = capsys.readouterr()
    _assert_plain_lines(code, out, err)
    if command[0] == "summary":
        assert "RUN\\-NAME\\-ANNOT" in out  # the run is there, as Markdown-escaped text
    else:
        assert "nl\\n::error::RUN-NAME-ANNOT" in out + err  # the newline written as an escape


def test_a_missing_run_lists_the_others_on_one_line(control_site, capsys):
    assert main(["compare", f"{control_site}:ok", f"{control_site}:nope"]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "nl\\n::error::" in err


@pytest.fixture(scope="module")
def named_site(tmp_path_factory) -> tuple[Path, object]:
    """Hosts whose names differ only in characters a file name cannot hold, hosts that are path steps,
    a host file of 255 bytes, runs `x y` and `x_y`, and two logdirs with one 255-character run each."""
    root = tmp_path_factory.mktemp("names")
    profile = root / "one" / "plugins" / "profile"
    long_host = "h" * (255 - len(".xplane.pb"))
    for run, hosts in {"clash": ["a b", "a:b", "a_b"], "steps": [".", "..", long_host],
                       "x y": ["host"], "x_y": ["host"]}.items():
        (profile / run).mkdir(parents=True)
        for host in hosts:
            (profile / run / f"{host}.xplane.pb").write_bytes(memory_capture())
    long_run = "r" * 255
    for logdir in ("one", "two"):
        (root / logdir / "plugins" / "profile" / long_run).mkdir(parents=True)
        (root / logdir / "plugins" / "profile" / long_run / "host.xplane.pb").write_bytes(plain_capture())
    site = root / "site"
    report = build_site([str(root / "one"), str(root / "two")], BuildOptions(output=str(site), jobs=1, cache=False))
    return site, report


def memory_capture() -> bytes:
    """One step on the host's Python thread and one allocator's allocation and free."""
    space = Space(("host",))
    line = space.plane("/host:CPU").line(name="tf_Compute")
    memory_event(line, "MemoryAllocation", 100, allocator="GPU_0_bfc", heap=96_000, free=4_000, requested=90_000,
                 allocated=96_000, address=0x10, peak=96_000, tf_op="a/MatMul", region_type="output", data_type=1,
                 shape="[24000]")
    memory_event(line, "MemoryDeallocation", 200, allocator="GPU_0_bfc", heap=0, free=100_000, requested=90_000,
                 allocated=96_000, address=0x10, peak=96_000)
    space.plane("/host:CPU").line(name="python").event("train", 0, 1_000, _r=1)
    return space.serialize()


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_every_run_and_host_builds_and_every_name_fits(named_site):
    site, report = named_site
    assert report.exit_code == 0 and report.errors == [] and report.hosts == 10
    doc = json.loads((site / "summary.json").read_text())
    assert len(doc["runs"]) == 6
    for path in _files(site):
        assert all(len(part.encode()) <= 255 for part in path.relative_to(site).parts), path
    long_runs = [r for r in doc["runs"] if r.startswith("r" * 200)]
    assert len(long_runs) == 2 and all((site / r / "index.html").is_file() for r in long_runs)


def test_hosts_differing_in_unsafe_characters_keep_a_csv_each(named_site):
    site, _ = named_site
    breakdowns = sorted(p.name for p in (site / "clash" / "data" / "memory_profile").glob("*__breakdown.csv"))
    assert len(breakdowns) == 3 and "a_b__GPU_0_bfc__breakdown.csv" in breakdowns  # the safe one as it was
    assert sorted(p.name for p in (site / "clash" / "trace").iterdir() if p.is_dir()) == ["a b", "a:b", "a_b"]


def test_hosts_that_are_path_steps_stay_inside_their_trace_folder(named_site):
    site, _ = named_site
    trace = site / "steps" / "trace"
    manifest = json.loads((trace / "manifest.json").read_text())
    files = [c["file"] for c in manifest["chunks"]]
    assert sorted({c["host"] for c in manifest["chunks"]}) == sorted([".", "..", "h" * 245])
    for file in files:
        parts = file.split("/")
        assert len(parts) == 2 and parts[0] not in (".", "..") and not parts[0].startswith(".")
        assert (trace / file).is_file()
    assert sorted(p.name for p in (site / "steps").iterdir() if p.is_file() and p.name.endswith(".json.gz")) == []
    inventory = [p.name for p in (site / "steps" / "data" / "inventory" / "hosts").iterdir()]
    assert len(inventory) == 3 and not [n for n in inventory if n.startswith(".")]


def test_compared_runs_that_sanitise_alike_keep_a_page_each(named_site, tmp_path, capsys):
    site, _ = named_site
    for candidate in ("x y", "x_y"):
        assert main(["compare", f"{site}:clash", f"{site}:{candidate}", "-o", str(tmp_path / "cmp")]) == 0
    pages = sorted(p.name for p in (tmp_path / "cmp" / "compare").glob("*.html"))
    assert len(pages) == 2 and "clash--vs--x_y.html" in pages
    capsys.readouterr()


def test_build_messages_write_a_control_run_name_as_text(tmp_path):
    logdir = _logdir(tmp_path, [CONTROL_RUN])
    (logdir / "plugins" / "profile" / CONTROL_RUN / "bad.xplane.pb").write_bytes(b"\xff\xff\xff")
    done = reportgen("build", str(logdir), "-o", str(tmp_path / "site"), "--jobs", "1", "-v", cwd=tmp_path,
                     timeout=300)
    assert done.returncode == 2, done.stderr  # the bad host is an input error; the good one builds
    assert "Traceback" not in done.stderr and not RAW_CONTROL.search(done.stderr + done.stdout)
    assert not [line for line in done.stderr.splitlines() if line.startswith("::")]
    assert "nl\\n::error::RUN-NAME-ANNOT%0A::warning::x/bad.xplane.pb" in done.stderr
