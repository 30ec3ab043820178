"""Rebuilds reuse the hosts (and run pages) whose files did not change, and nothing else."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

import reportgen.pipeline.cache as buildcache
from reportgen.cli.main import main
from reportgen.pipeline import result
from reportgen.pipeline.build import BuildOptions, build_site
from reportgen.pipeline.host_stage import PACKAGE, HostOutcome, package_fingerprint
from reportgen.sections.registry import SECTIONS
from tests.logdirs import assert_same_site, make_logdir, small_capture


def _build(logdir, output, **options):
    lines: list[str] = []
    report = build_site([str(logdir)], BuildOptions(output=str(output), log=lines.append, **options))
    return report, lines


def _resign(cache_root, entry):
    """Sign an edited entry as this user's builds do: what the entry's data may hold is then checked by
    the result's reader alone (the case of someone who holds the signing key)."""
    cache = buildcache.HostCache(cache_root)
    cache.open()
    (entry / buildcache.MANIFEST).unlink()
    cache._write_manifest(entry, entry)


def _small_logdir(root):
    return make_logdir(root, {
        "a": {"h0": small_capture(1), "h1": small_capture(2)},
        "b": {"vm": small_capture(3)},
        "c": {"vm": small_capture(4)},
    })


def test_adding_a_run_to_twenty_decodes_and_renders_that_run_only(tmp_path):
    logdir = make_logdir(tmp_path / "logdir", {f"run_{i:02d}": {"vm": small_capture(i)} for i in range(1, 21)})
    first, _ = _build(logdir, tmp_path / "site")
    assert len(first.decoded) == 20 and first.cached == []
    make_logdir(logdir, {"run_21": {"vm": small_capture(21)}})
    second, lines = _build(logdir, tmp_path / "site")
    assert second.decoded == ["run_21/vm.xplane.pb"]
    assert len(second.cached) == 20 and "run_21/vm.xplane.pb" not in second.cached
    reused = sorted(line.split(":")[0] for line in lines if line.endswith("pages from the rebuild cache"))
    assert reused == [f"run_{i:02d}" for i in range(1, 21)]
    assert "render.inventory" in second.timings  # run_21's page, and only it, was rendered
    assert (tmp_path / "site" / "run_21" / "index.html").is_file()
    assert second.runs == 21 and second.exit_code == 0


def test_touched_files_are_reused_changed_files_rebuilt_and_the_site_equals_a_fresh_build(tmp_path):
    logdir = _small_logdir(tmp_path / "logdir")
    first, _ = _build(logdir, tmp_path / "site", jobs=1)
    assert len(first.decoded) == 4
    host = logdir / "plugins" / "profile" / "a" / "h1.xplane.pb"
    stat = host.stat()
    os.utime(host, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))  # same bytes, new time
    touched, _ = _build(logdir, tmp_path / "site", jobs=1)
    assert touched.decoded == [] and len(touched.cached) == 4
    assert touched.runner == "none"
    host.write_bytes(small_capture(5))  # new content
    changed, lines = _build(logdir, tmp_path / "site", jobs=1)
    assert changed.decoded == ["a/h1.xplane.pb"]
    assert sorted(changed.cached) == ["a/h0.xplane.pb", "b/vm.xplane.pb", "c/vm.xplane.pb"]
    assert "a: pages from the rebuild cache" not in lines and "b: pages from the rebuild cache" in lines
    fresh, _ = _build(logdir, tmp_path / "fresh", cache=False)
    assert len(fresh.decoded) == 4
    assert_same_site(tmp_path / "site", tmp_path / "fresh")
    assert not (tmp_path / ".fresh.reportgen-cache").exists()
    assert (tmp_path / ".site.reportgen-cache").is_dir()  # beside the site, not in it
    assert not [p for p in (tmp_path / "site").rglob("*") if p.name.endswith(".pickle")]


def _rewritten(path, change) -> None:
    """Rewrite a stored result with `change(tables)` applied to its Arrow tables, as well-formed Arrow."""
    tables = result.read_tables(path.read_bytes())
    path.write_bytes(result.write_tables(change(tables)))


def _renamed(tables, old: str, new: str):
    """The tables with the one of the declared type named `old` claiming to be of type `new`."""
    out = []
    for table in tables:
        meta = dict(table.schema.metadata or {})
        if meta.get(b"reportgen.name") == old.encode():
            table = table.replace_schema_metadata({**meta, b"reportgen.name": new.encode()})
        out.append(table)
    return out


def _numbers_as_text(tables):
    """The first frame with a numeric column said to be a column of strings."""
    for i, table in enumerate(tables):
        meta = dict(table.schema.metadata or {})
        if meta.get(b"reportgen.kind") == b"frame" and b'"numpy"' in meta[b"reportgen.layout"]:
            meta[b"reportgen.layout"] = meta[b"reportgen.layout"].replace(b'"kind": "numpy"', b'"kind": "object"', 1)
            tables[i] = table.replace_schema_metadata(meta)
            return tables
    raise AssertionError("no frame with a numeric column")


def test_corrupt_truncated_and_foreign_entries_are_ignored_reported_with_v_and_rebuilt(tmp_path):
    logdir = _small_logdir(tmp_path / "logdir")
    _build(logdir, tmp_path / "site", jobs=1)
    cache = tmp_path / ".site.reportgen-cache"
    entries = sorted(cache.glob("hosts/*/*/outcome.arrow"))
    assert len(entries) == 4 and not list(cache.rglob("*.pickle"))
    entries[0].write_bytes(entries[0].read_bytes()[:400])  # truncated
    entries[1].write_bytes(b"not Arrow at all")
    # Foreign: well-formed Arrow whose table claims a type that is not declared (here: os.system).
    _rewritten(entries[2], lambda tables: _renamed(tables, "reportgen.sections.base.HostSummary", "os.system"))
    _resign(cache, entries[2].parent)
    # Altered: a frame's numbers said to be text (signed by the key's holder: the reader alone refuses it).
    _rewritten(entries[3], _numbers_as_text)
    _resign(cache, entries[3].parent)
    for run_entry in cache.glob("runs/*/run.arrow"):
        run_entry.write_bytes(result.MAGIC + b"\xff" * 8)
    rebuilt, lines = _build(logdir, tmp_path / "site", jobs=1)
    assert rebuilt.exit_code == 0 and rebuilt.warnings == []
    assert rebuilt.cached == [] and len(rebuilt.decoded) == 4
    ignored = [line for line in lines if "ignoring an unreadable cache entry" in line]
    assert len(ignored) >= 4, lines
    assert any("ResultError: holds a table of an undeclared type b'os.system'" in line for line in ignored), lines
    assert any("ResultError: holds a bad text column" in line for line in ignored), lines
    assert any("not the file the manifest records" in line for line in ignored), lines
    fresh, _ = _build(logdir, tmp_path / "fresh", cache=False)
    assert_same_site(tmp_path / "site", tmp_path / "fresh")
    again, _ = _build(logdir, tmp_path / "site", jobs=1)  # the bad entries were replaced
    assert len(again.cached) == 4


def test_a_crafted_entry_cannot_run_code(tmp_path):
    """A pickle that runs a command when loaded (what the cache held before) is never loaded; a stored
    result names no class: a table claiming one the declared types do not reach is refused."""
    import pickle

    logdir = _small_logdir(tmp_path / "logdir")
    _build(logdir, tmp_path / "site", jobs=1)
    cache = tmp_path / ".site.reportgen-cache"
    proof = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {proof}",)

    for entry in cache.glob("hosts/*/*"):
        (entry / "outcome.pickle").write_bytes(pickle.dumps(Payload()))
        _rewritten(entry / "outcome.arrow", lambda tables: _renamed(
            tables, "reportgen.sections.base.HostSummary", "reportgen.pipeline.cache.HostCache"))
        _resign(cache, entry)
    rebuilt, lines = _build(logdir, tmp_path / "site", jobs=1)
    assert not proof.exists()
    assert rebuilt.exit_code == 0 and len(rebuilt.decoded) == 4
    assert any("undeclared type b'reportgen.pipeline.cache.HostCache'" in line for line in lines), lines


def test_the_cache_folder_is_private_and_site_files_are_copies(tmp_path):
    logdir = _small_logdir(tmp_path / "logdir")
    _build(logdir, tmp_path / "site", jobs=1)
    cache = tmp_path / ".site.reportgen-cache"
    assert (cache.stat().st_mode & 0o777) == 0o700
    _build(logdir, tmp_path / "site", jobs=1)  # every host and run page from the cache
    page = tmp_path / "site" / "a" / "index.html"
    assert page.stat().st_nlink == 1
    cached_pages = list(cache.glob("runs/*/files/index.html"))
    assert cached_pages
    before = {p: p.read_bytes() for p in cached_pages}
    with open(page, "r+b") as handle:  # edited in place, as an editor that does not rename would
        handle.write(b"<!-- edited -->")
    assert {p: p.read_bytes() for p in cached_pages} == before
    shared = tmp_path / "shared-cache"
    _build(logdir, tmp_path / "other", jobs=1, cache_dir=str(shared / "deep"))
    assert (shared.stat().st_mode & 0o777) == 0o700 and ((shared / "deep").stat().st_mode & 0o777) == 0o700


def test_no_cache_forces_every_host_and_a_schema_change_invalidates_the_cache(tmp_path, monkeypatch):
    logdir = _small_logdir(tmp_path / "logdir")
    _build(logdir, tmp_path / "site", jobs=1)
    forced, _ = _build(logdir, tmp_path / "site", jobs=1, cache=False)
    assert len(forced.decoded) == 4 and forced.cached == []
    _build(logdir, tmp_path / "site", jobs=1)  # the cache again
    # The code alone changed (not the declared parts): hosts come from the cache, their pages are drawn again.
    monkeypatch.setattr(buildcache, "site_fingerprint", lambda: "other code and templates")
    other_code, lines = _build(logdir, tmp_path / "site", jobs=1)
    assert other_code.decoded == [] and len(other_code.cached) == 4
    assert not any("pages from the rebuild cache" in line for line in lines)
    # A part's meaning changed (its section's part_version raised): every host is computed again.
    overview = next(s for s in SECTIONS if s.slug == "overview")
    monkeypatch.setattr(overview, "part_version", overview.part_version + 1)
    other_schema, lines = _build(logdir, tmp_path / "site", jobs=1)
    assert len(other_schema.decoded) == 4 and other_schema.cached == []


def test_the_schema_follows_every_declared_field():
    """A field added to any type a part reaches changes the key (no version to remember to raise)."""
    from reportgen.core.findings.facts import CopyStats

    before = result.outcome_schema(HostOutcome)
    assert result.outcome_schema(HostOutcome) == before
    fields = [(f.name, f.type, f) for f in dataclasses.fields(CopyStats)]
    extended = dataclasses.make_dataclass("CopyStats", [*fields, ("new_field", int, dataclasses.field(default=0))])
    extended.__module__ = CopyStats.__module__
    assert result.schema_fingerprint((extended,)) != result.schema_fingerprint((CopyStats,))


def test_the_code_fingerprint_follows_every_module(tmp_path):
    package = tmp_path / "pkg"
    shutil.copytree(PACKAGE / "sections", package / "sections")
    before = package_fingerprint(package, ("*.py",))
    assert package_fingerprint(package, ("*.py",)) == before
    module = package / "sections" / "inventory.py"
    module.write_text(module.read_text() + "\n# changed\n")
    assert package_fingerprint(package, ("*.py",)) != before


def test_a_cache_folder_is_shared_between_outputs(tmp_path):
    logdir = _small_logdir(tmp_path / "logdir")
    cache_dir = tmp_path / "cache"
    first, _ = _build(logdir, tmp_path / "one", jobs=1, cache_dir=str(cache_dir))
    assert len(first.decoded) == 4
    assert not (tmp_path / ".one.reportgen-cache").exists()
    second, _ = _build(logdir, tmp_path / "two", jobs=1, cache_dir=str(cache_dir))
    assert second.decoded == [] and len(second.cached) == 4
    assert_same_site(tmp_path / "one", tmp_path / "two")


@pytest.mark.parametrize("jobs", ["2"])
def test_the_command_line_says_which_hosts_came_from_the_cache(tmp_path, capsys, jobs):
    logdir = _small_logdir(tmp_path / "logdir")
    args = ["build", str(logdir), "-o", str(tmp_path / "site"), "--jobs", jobs, "-v", "--timings"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "reportgen: a/h0.xplane.pb: decoded" in err
    assert "host.decode" in err and "peak RSS" in err
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "reportgen: a/h0.xplane.pb: from the rebuild cache" in err
    assert "decoded" not in err
    assert main([*args, "--no-cache"]) == 0
    assert "reportgen: a/h0.xplane.pb: decoded" in capsys.readouterr().err


def test_the_cache_beside_a_site_keeps_the_last_build_only(tmp_path):
    logdir = _small_logdir(tmp_path / "logdir")
    cache = tmp_path / ".site.reportgen-cache"
    _build(logdir, tmp_path / "site", jobs=1)
    assert len(list(cache.glob("hosts/*/*/outcome.arrow"))) == 4
    assert len(list(cache.glob("runs/*/run.arrow"))) == 3
    shutil.rmtree(logdir / "plugins" / "profile" / "c")
    (logdir / "plugins" / "profile" / "b" / "vm.xplane.pb").write_bytes(small_capture(6))
    report, _ = _build(logdir, tmp_path / "site", jobs=1)
    assert report.decoded == ["b/vm.xplane.pb"]
    # Run c is gone and b's old content is superseded: their entries went with them.
    assert len(list(cache.glob("hosts/*/*/outcome.arrow"))) == 3
    assert len(list(cache.glob("runs/*/run.arrow"))) == 2
    again, _ = _build(logdir, tmp_path / "site", jobs=1)
    assert again.decoded == [] and len(again.cached) == 3


def _timeline(step: int, duration_us: float) -> str:
    """A ProfilerHook `timeline-<step>.json` (Chrome trace of one step's ops)."""
    device = "/job:localhost/replica:0/task:0/device:CPU:0 Compute"
    return json.dumps({"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": device}},
        {"ph": "X", "cat": "Op", "name": "MatMul", "pid": 0, "tid": 0, "ts": 1000 * step, "dur": duration_us,
         "args": {"name": "dense/MatMul", "op": "MatMul"}},
    ]})


def test_an_older_profilers_host_is_keyed_by_every_one_of_its_files(tmp_path):
    run = tmp_path / "logdir" / "plugins" / "profile" / "hook"
    run.mkdir(parents=True)
    for step in (1, 2, 3):
        (run / f"timeline-{step}.json").write_text(_timeline(step, 40.0))
    first, _ = _build(tmp_path / "logdir", tmp_path / "site", jobs=1)
    assert first.decoded == ["hook/timeline-1.json"]
    again, _ = _build(tmp_path / "logdir", tmp_path / "site", jobs=1)
    assert again.decoded == [] and again.cached == ["hook/timeline-1.json"]
    (run / "timeline-3.json").write_text(_timeline(3, 55.0))  # not the file the host is named after
    changed, _ = _build(tmp_path / "logdir", tmp_path / "site", jobs=1)
    assert changed.decoded == ["hook/timeline-1.json"]
    fresh, _ = _build(tmp_path / "logdir", tmp_path / "fresh", cache=False)
    assert_same_site(tmp_path / "site", tmp_path / "fresh")
