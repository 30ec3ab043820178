"""The command line as users run it: `python -m reportgen …` in a subprocess."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reportgen import __version__
from reportgen.cli import main as cli
from reportgen.loaders.xspace import decode_xspace
from tests.clirun import reportgen, sample_site_build
from tests.conftest import REPO
from tests.sitecheck import assert_links_resolve

SAMPLE = REPO / "reportgen" / "sample" / "plugins" / "profile"
SAMPLE_RUNS = ["tf_keras_fast", "tf_keras_input_bound"]


def test_version():
    proc = reportgen("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"reportgen {__version__}"


def test_help_shows_examples():
    for args in (["--help"], ["build", "--help"]):
        proc = reportgen(*args)
        assert proc.returncode == 0
        assert "examples:" in proc.stdout
        assert "reportgen build" in proc.stdout and "-o" in proc.stdout and "--runs" in proc.stdout


@pytest.fixture(scope="module")
def sample_builds(tmp_path_factory):
    """The bundled sample built twice: plainly by a subprocess with no arguments
    (--jobs 2, default output folder) and quietly in-process with --jobs 1."""
    cwd, plain = sample_site_build()
    quiet_site = tmp_path_factory.mktemp("cli") / "quiet-site"
    return cwd, plain, quiet_site


def test_build_without_logdir_builds_the_sample_into_site(sample_builds):
    cwd, plain, _ = sample_builds
    assert plain.returncode == 0, plain.stderr
    site = cwd / "site"
    summary = json.loads((site / "summary.json").read_text())
    assert list(summary["runs"]) == SAMPLE_RUNS
    for run in SAMPLE_RUNS:
        assert (site / run / "index.html").is_file()
    assert_links_resolve(site)


def test_one_line_summary(sample_builds):
    cwd, plain, _ = sample_builds
    events = sum(decode_xspace(str(p), p.read_bytes()).event_count for p in SAMPLE.glob("*/*.xplane.pb"))
    lines = plain.stdout.splitlines()
    assert len(lines) == 1, plain.stdout
    match = re.fullmatch(r"reportgen: 2 runs, 2 hosts, ([\d,]+) events in (\d+\.\d) s → (.+)", lines[0])
    assert match, lines[0]
    assert int(match.group(1).replace(",", "")) == events
    assert Path(match.group(3)) == (cwd / "site").resolve()
    # No progress bar when stderr is not a terminal; at most the notes of a machine's first build.
    assert all(line.startswith(("reportgen: first build on this machine:", "reportgen: kernels compiled in "))
               for line in plain.stderr.splitlines()), plain.stderr


def test_quiet_prints_nothing(sample_builds, capfd):
    _, _, quiet_site = sample_builds
    assert cli.main(["build", "-q", "--jobs", "1", "-o", str(quiet_site)]) == 0
    assert capfd.readouterr() == ("", "")
    assert (quiet_site / "summary.json").is_file()


def _files(site: Path) -> dict[str, bytes]:
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


def test_jobs_1_and_2_build_identical_sites(sample_builds):
    cwd, _, quiet_site = sample_builds
    if not (quiet_site / "summary.json").exists():
        assert cli.main(["build", "-q", "--jobs", "1", "-o", str(quiet_site)]) == 0
    one, two = _files(quiet_site), _files(cwd / "site")
    assert sorted(one) == sorted(two)
    assert [name for name in one if one[name] != two[name]] == []


def test_summary_json_shape(sample_builds):
    cwd, _, _ = sample_builds
    summary = json.loads((cwd / "site" / "summary.json").read_text())
    assert summary["schema"] == 1
    assert summary["generator"] == f"reportgen {__version__}"
    assert summary["hosts"] == 2 and summary["errors"] == []
    for name, run in summary["runs"].items():
        assert run["hosts"] == ["vm"], name
        assert run["errors"] == []
        assert isinstance(run["tools"], dict)
        for slug, tool in run["tools"].items():
            assert tool["page"] == f"{name}/{slug}.html"
            assert (cwd / "site" / tool["page"]).is_file()


def test_runs_filter(tmp_path, capsys):
    out = tmp_path / "site"
    assert cli.main(["build", "--runs", " tf_keras_fast ,", "-o", str(out), "--jobs", "1"]) == 0
    assert list(json.loads((out / "summary.json").read_text())["runs"]) == ["tf_keras_fast"]
    assert not (out / "tf_keras_input_bound").exists()
    assert "1 run, 1 host" in capsys.readouterr().out
    assert cli.main(["build", "--runs", "no_such_run", "-o", str(out)]) == 1
    assert "matching --runs no_such_run" in capsys.readouterr().err


def test_several_logdirs_with_the_same_run_names(tmp_path, capsys):
    out = tmp_path / "site"
    assert cli.main(["build", str(SAMPLE.parent.parent), str(SAMPLE / "tf_keras_fast"), "-o", str(out), "-q",
                     "--jobs", "1"]) == 0
    assert list(json.loads((out / "summary.json").read_text())["runs"]) == [*SAMPLE_RUNS, "tf_keras_fast-2"]
    assert_links_resolve(out)


@pytest.mark.parametrize("args", [["build", "--jobs", "many"], ["frobnicate"], ["build", "--no-such-option"]])
def test_bad_arguments_exit_1(args):
    """OUTPUTS.md: bad arguments are exit status 1 (argparse's own default is 2)."""
    proc = reportgen(*args)
    assert proc.returncode == 1
    assert "usage:" in proc.stderr and proc.stdout == ""


def test_no_command_prints_help_and_fails():
    proc = reportgen()
    assert proc.returncode == 1
    assert "examples:" in proc.stdout


def test_exit_codes_agree():
    from reportgen.pipeline import build

    assert (build.EXIT_OK, cli.EXIT_FAILED, build.EXIT_FAILED, build.EXIT_PARTIAL) == (0, 1, 1, 2)


def test_run_names_never_collide(tmp_path, capsys):
    """Runs named like the site's own files, or like another run's suffixed name, get folders of their own."""
    data = (SAMPLE / "tf_keras_fast" / "vm.xplane.pb").read_bytes()
    first, second = tmp_path / "one" / "plugins" / "profile", tmp_path / "two" / "plugins" / "profile"
    for profile, runs in ((first, ["index.html", "assets", "a", "a-2", "a#b?c%d"]), (second, ["a"])):
        for run in runs:
            (profile / run).mkdir(parents=True)
            (profile / run / "vm.xplane.pb").write_bytes(data)
    out = tmp_path / "site"
    assert cli.main(["build", str(tmp_path / "one"), str(tmp_path / "two"), "-o", str(out), "--jobs", "1"]) == 0
    capsys.readouterr()
    runs = json.loads((out / "summary.json").read_text())["runs"]
    assert list(runs) == ["a", "a#b?c%d", "a-2", "assets-2", "index.html-2", "a-3"]
    for run in runs:
        assert (out / run / "index.html").is_file()
    assert (out / "index.html").is_file()
    assert_links_resolve(out)


def test_build_from_capture_files(tmp_path):
    """One capture file, or several, without a logdir around them: a run named after their folder."""
    out = tmp_path / "site"
    fast = SAMPLE / "tf_keras_fast" / "vm.xplane.pb"
    slow = SAMPLE / "tf_keras_input_bound" / "vm.xplane.pb"
    assert cli.main(["build", str(fast), str(slow), "-o", str(out), "-q", "--jobs", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["runs"]) == ["tf_keras_fast", "tf_keras_input_bound"]
    assert summary["runs"]["tf_keras_fast"]["hosts"] == ["vm"]
    assert_links_resolve(out)


def test_build_from_a_file_that_is_no_capture_names_it(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    proc = reportgen("build", str(notes), "-o", str(tmp_path / "site"))
    assert proc.returncode == 1
    assert f"{notes}: not a capture file" in proc.stderr and "Traceback" not in proc.stderr


def _stage_seconds(timings: str) -> dict[str, float]:
    found = {}
    for line in timings.splitlines():
        if match := re.fullmatch(r"(\S.*?)\s+(\d+\.\d{3})(?:\s+[\d.]+%)?", line):
            found[match.group(1)] = float(match.group(2))
    return found


def test_the_printed_time_is_the_whole_commands(tmp_path):
    """The summary line counts the command from its process's start: start-up, the build and the single file's
    assembly, which `--timings` lists (as disjoint stages: their sum cannot exceed the command's time)."""
    proc = reportgen("build", "-o", str(tmp_path / "site"), "--single-file", str(tmp_path / "one.html"),
                     "--timings", "--jobs", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    stages = _stage_seconds(proc.stderr)
    printed = float(re.search(r"events in (\d+\.\d) s →", proc.stdout).group(1))
    assert stages["start-up"] > 0 and stages["single file"] > 0, proc.stderr
    assert stages["total"] >= stages["start-up"] + stages["hosts"] + stages["single file"]
    assert printed >= round(stages["total"], 1)  # the line is printed after the table
