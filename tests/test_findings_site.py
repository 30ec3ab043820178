"""Findings on the shared captures, built end to end: the ones each capture must (and must not) give, every
number each finding cites read back from where it says the site shows it, the run page, summary.json, the
pull-request summary and `reportgen check`."""

from __future__ import annotations

import csv
import gzip
import html
import json
import math
import re
from functools import cache
from pathlib import Path

import pytest

from reportgen.core.events.schema import DERIVED_MIN
from reportgen.core.events.tf_op import TENSORFLOW, parse_tf_op_fullname
from reportgen.core.findings.facts import GAP_MIN_PS
from reportgen.pipeline.build import BuildOptions, build_site
from tests.browser import chromium, console_errors, needs_browser
from tests.conftest import LOGDIR, RUNS, needs_shared
from tests.sitecheck import parse_page

pytestmark = needs_shared
DERIVED_TID = DERIVED_MIN & 0xFFFFFFFF  # derived lines (Steps, TensorFlow Ops, …) as the trace's thread ids
_COMPILE = re.compile(r"backend_compile|compile_or_get_cached|Compiler::Compile|Client::Compile|(^|:)XlaCompile$")
_SYNC = re.compile(r"^(cuda|cu|hip)(Stream|Device|Ctx|Event)Synchronize", re.IGNORECASE)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("findings") / "site"
    report = build_site([str(LOGDIR)], BuildOptions(output=str(out), jobs=2))
    assert report.exit_code == 0
    return out


def run_block(site: Path, run: str) -> dict:
    return json.loads((site / "summary.json").read_text())["runs"][run]


def items(site: Path, run: str) -> list[dict]:
    return run_block(site, run)["findings"]["items"]


def by_id(site: Path, run: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for item in items(site, run):
        out.setdefault(item["id"], item)
    return out


# --- what each shared capture must say ------------------------------------------------------------------

def test_input_bound_keras_run_names_the_tf_data_bottleneck_as_the_input_page_does(site):
    f = by_id(site, "tf_keras_input_bound")["input.tf_data_bottleneck"]
    block = run_block(site, "tf_keras_input_bound")
    assert f["severity"] == "high"
    assert f["percent_of_step"] == pytest.approx(block["overview"]["input_percent"])
    assert f["ms_per_step"] == pytest.approx(block["overview"]["breakdown_ms"]["input"])
    bottleneck = block["input_pipeline"]["bottleneck"]["iterator"]
    assert bottleneck == "Iterator::Root::MapAndBatch" and "MapAndBatch" in f["title"]
    page = (site / "tf_keras_input_bound" / "input_pipeline.html").read_text()
    assert f"Bottleneck: <code>{bottleneck}</code>" in page
    assert "num_parallel_calls" in f["action"] and "prefetch" in f["action"]
    assert f["links"][0]["href"].startswith("input_pipeline.html#iterator-")


def test_fixed_keras_run_has_no_input_finding(site):
    assert not {i["id"] for i in items(site, "tf_keras_fast")} & {"input.tf_data_bottleneck", "input.bound"}


def test_tpu_inference_says_asynchronous_copies_dominate_device_time(site):
    f = by_id(site, "tpu_inference_2")["tpu.async_copies_dominate"]
    categories = {c["name"]: c["time_percent"] for c in run_block(site, "tpu_inference_2")["op_profile"]["categories"]}
    assert f["percent_of_device_time"] == pytest.approx(categories["copy-done"] + categories["copy-start"])
    assert f["severity"] == "high" and items(site, "tpu_inference_2")[0]["id"] == "tpu.async_copies_dominate"
    assert "host memory" in f["title"] and "memory_kind='pinned_host'" in f["action"]  # a JAX capture's advice
    # Its run has no step markers: said, with steps inferred from the repeated program, marked as inferred.
    no_steps = by_id(site, "tpu_inference_2")["capture.no_steps"]
    assert "steps inferred from 100 runs of jit_f" in no_steps["title"]


def test_findings_are_ordered_and_shaped_as_the_outputs_contract_says(site):
    keys = {"id", "severity", "title", "ms_per_step", "percent_of_step", "percent_of_device_time", "bytes",
            "estimate", "evidence", "action", "links", "claims"}
    for run in RUNS:
        block = run_block(site, run)["findings"]
        assert set(block) == {"counts", "items"}
        rank = {"high": 0, "medium": 1, "low": 2, "info": 3}
        order = [rank[i["severity"]] for i in block["items"]]
        assert order == sorted(order), run
        assert block["counts"] == {s: sum(1 for i in block["items"] if i["severity"] == s) for s in rank}
        for item in block["items"]:
            assert set(item) == keys, item["id"]
            assert item["estimate"] and item["action"] and item["title"]
            for e in item["evidence"]:
                assert set(e) == {"label", "value", "unit", "source", "href"}


def test_findings_never_count_a_moment_twice(site):
    """No two findings of a run claim one ledger cause, and the shares of the step they quote add up to at most
    100% (and to at most the ledger's share of the causes they claim)."""
    for run in RUNS:
        block = run_block(site, run)
        ledger = block.get("step_ledger")
        claimed: list[str] = []
        total = 0.0
        for item in block["findings"]["items"]:
            claimed += item["claims"]
            total += item["percent_of_step"] or 0.0
            if item["claims"] and item["percent_of_step"] is not None:
                assert item["percent_of_step"] <= sum(ledger["percent"][c] for c in item["claims"]) + 1e-6, item["id"]
        assert len(claimed) == len(set(claimed)), run
        assert total <= 100.0 + 1e-6, run
        if ledger:
            assert sum(ledger["percent"].values()) == pytest.approx(100.0)
            assert sum(ledger["average_ms"].values()) == pytest.approx(ledger["step_time_ms"])


# --- honest numbers: every cited number is where its source says -------------------------------------------

def _walk(block: dict, path: list):
    value = block
    for key in path:
        if isinstance(key, dict):
            value = next(v for v in value if all(v.get(k) == x for k, x in key.items()))
        else:
            value = value[key]
    return value


def _matches(cell: str, wanted: str) -> bool:
    if cell == wanted:
        return True
    try:
        return float(cell) == float(wanted)
    except ValueError:
        return False


@cache
def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _csv_value(run_dir: Path, source: dict) -> float:
    rows = [r for r in _csv_rows(run_dir / source["csv"])
            if all(_matches(r[k], v) for k, v in source["where"].items())]
    assert rows, f"no row of {source['csv']} where {source['where']}"
    values = [float(r[source["column"]]) for r in rows]
    aggregate = source.get("aggregate")
    return sum(values) if aggregate == "sum" else sum(values) / len(values) if aggregate == "mean" else values[0]


@cache
def _trace(run_dir: Path, host: str) -> tuple[list[dict], dict[int, str], dict[tuple[int, int], str]]:
    """(complete events, process names by pid, thread names by (pid, tid)) of a host's trace chunks."""
    manifest = json.loads((run_dir / "trace" / "manifest.json").read_text())
    events, processes, threads = [], {}, {}
    for chunk in manifest["chunks"]:
        if chunk["host"] != host:
            continue
        for e in json.load(gzip.open(run_dir / "trace" / chunk["file"]))["traceEvents"]:
            if e.get("ph") == "X":
                events.append(e)
            elif e.get("name") == "process_name":
                processes[e["pid"]] = e["args"]["name"]
            elif e.get("name") == "thread_name":
                threads[(e["pid"], e["tid"])] = e["args"]["name"]
    return events, processes, threads


def _plane_events(run_dir: Path, host: str, plane: str, real_lines: bool = True, thread: str | None = None):
    events, processes, threads = _trace(run_dir, host)
    pids = {pid for pid, name in processes.items() if name == f"{host} {plane}"}
    out = [e for e in events if e["pid"] in pids and (not real_lines or e["tid"] < DERIVED_TID)]
    if thread is not None:
        out = [e for e in out if threads.get((e["pid"], e["tid"])) == thread]
    return out


def _span(e) -> tuple[float, float]:
    return e["ts"], e["ts"] + e.get("dur", 0.0)


def _union(spans) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _inside(spans, windows) -> list[tuple[float, float]]:
    return [(max(a, lo), min(b, hi)) for lo, hi in windows for a, b in spans if min(b, hi) > max(a, lo)]


def _length(spans) -> float:
    return sum(b - a for a, b in spans)


def _us(ps: int) -> float:
    return ps / 1e6


def _windows(source: dict) -> list[tuple[float, float]]:
    return [(_us(a), _us(b)) for a, b in source["windows"]]


def _trace_value(run_dir: Path, source: dict, evidence: dict) -> float:
    host, plane, what = source["host"], source.get("plane", ""), source["what"]
    if what in ("event", "step"):
        t0, t1 = _us(source["t0_ps"]), _us(source["t1_ps"])
        events = _plane_events(run_dir, host, plane, real_lines=False) if plane else _trace(run_dir, host)[0]
        found = [e for e in events if abs(e["ts"] - t0) < 0.002 and abs(_span(e)[1] - t1) < 0.002
                 and e["name"] == source.get("name", e["name"])]
        assert found, f"no event {source} in {host}'s trace"
        return (t1 - t0) / 1e3 if evidence["unit"] == "ms" and what == "event" else evidence["value"]
    if what in ("gap", "program_gap"):
        t0, t1 = _us(source["t0_ps"]), _us(source["t1_ps"])
        busy = _plane_events(run_dir, host, plane, thread="XLA Modules" if what == "program_gap" else None,
                             real_lines=what == "gap")
        assert not _inside([_span(e) for e in busy], [(t0 + 0.001, t1 - 0.001)]), f"the gap {source} is not idle"
        return (t1 - t0) / 1e3
    if what in ("busy_percent", "gap_total"):
        windows = _windows(source) if "windows" in source else [(_us(source["t0_ps"]), _us(source["t1_ps"]))]
        busy = _union(_inside(_union(_span(e) for e in _plane_events(run_dir, host, plane) if e.get("dur")),
                              windows))
        if what == "busy_percent":
            return 100.0 * _length(busy) / _length(windows)
        gaps = 0.0
        for lo, hi in windows:
            edges = [lo] + [x for a, b in busy if lo <= a and b <= hi for x in (a, b)] + [hi]
            gaps += sum(b - a for a, b in zip(edges[::2], edges[1::2]) if (b - a) * 1e6 >= GAP_MIN_PS)
        return gaps / 1e3
    if what == "program_idle_percent":
        runs = _union(_span(e) for e in _plane_events(run_dir, host, plane, real_lines=False, thread="XLA Modules"))
        first = _us(source["t0_ps"]) if "t0_ps" in source else runs[0][0]
        span = runs[-1][1] - first
        return 100.0 * (span - _length(_inside(runs, [(first, runs[-1][1])]))) / span
    raise AssertionError(f"no check for trace source {what!r}")


def _host_rows(run_dir: Path, host: str):
    events, processes, _ = _trace(run_dir, host)
    pid = next(p for p, n in processes.items() if n == f"{host} /host:CPU")
    return [e for e in events if e["pid"] == pid and e.get("dur")]


def _gpu_rows(run_dir: Path, host: str):
    events, processes, _ = _trace(run_dir, host)
    pids = {p for p, n in processes.items() if n.startswith(f"{host} /device:GPU:")}
    return [e for e in events if e["pid"] in pids and e["tid"] < DERIVED_TID and e.get("dur")]


def _total_value(run_dir: Path, source: dict, evidence: dict) -> float:
    host, kind, field = source["host"], source["kind"], source.get("field", "count")
    if kind in ("sync_copies", "pageable_copies"):
        rows = []
        for e in _gpu_rows(run_dir, host):
            text = (e.get("args") or {}).get("memcpy_details") or (e.get("args") or {}).get("memset_details")
            if not text:
                continue
            parts = dict(re.findall(r"(\w+):(\S+)", text))
            if (kind == "sync_copies" and parts.get("async") == "0") or \
                    (kind == "pageable_copies" and "pageable" in (parts.get("kind_src"), parts.get("kind_dst"))):
                rows.append((e, int(parts.get("size", parts.get("num_bytes", "0")) or 0)))
        return {"count": len(rows), "duration": sum(e["dur"] for e, _ in rows) / 1e3,
                "bytes": sum(b for _, b in rows)}[field]
    if kind == "module_runs":
        runs = sorted(_plane_events(run_dir, host, source["plane"], real_lines=False, thread="XLA Modules"),
                      key=lambda e: e["ts"])
        runs = [e for e in runs if e["name"] == source["name"] and e.get("dur")]
        if field == "count":
            return len(runs)
        if field == "mean_duration":
            return sum(e["dur"] for e in runs) / len(runs) / 1e3
        return (runs[-1]["ts"] - runs[0]["ts"]) / (len(runs) - 1) / 1e3
    # Host-thread work inside the steps (`windows`), or over the whole host timeline.
    rows = _host_rows(run_dir, host)
    launch = [e for e in rows if "correlation_id" in (e.get("args") or {})]
    if kind == "launches":
        chosen = launch
    elif kind == "compilation":
        chosen = [e for e in rows if _COMPILE.search(e["name"])]
    elif kind == "sync_calls":
        chosen = [e for e in rows if _SYNC.match(e["name"])]
    elif kind == "host_ops":
        # The trace names an op by its display name and keeps the full name in `long_name`.
        chosen = [e for e in rows if "correlation_id" not in (e.get("args") or {}) and not _COMPILE.search(e["name"])
                  and parse_tf_op_fullname((e.get("args") or {}).get("long_name", e["name"])).category == TENSORFLOW]
    else:
        raise AssertionError(f"no check for trace total {kind!r}")
    windows = _windows(source) if source.get("windows") else [(min(e["ts"] for e in chosen),
                                                               max(_span(e)[1] for e in chosen))]
    inside = [e for e in chosen if any(_span(e)[1] > lo and e["ts"] < hi for lo, hi in windows)]
    busy = _union(_inside(_union(_span(e) for e in inside), windows))
    if field == "count":
        return len(inside)
    if field == "busy":
        return _length(busy) / 1e3
    cover = [_span(e) for e in _gpu_rows(run_dir, host)]
    if kind == "host_ops":
        cover += [_span(e) for e in launch]
    cover = _union(_inside(_union(cover), windows))
    return (_length(busy) - _length(_inside(cover, busy))) / 1e3


def _cited(run_dir: Path, block: dict, evidence: dict):
    source = evidence["source"]
    if "summary" in source:
        return _walk(block, source["summary"])
    if "sum" in source:
        return sum(_cited(run_dir, block, {**evidence, "source": s}) for s in source["sum"])
    if "csv" in source:
        return _csv_value(run_dir, source)
    if "page_text" in source:
        text = (run_dir / source["page_text"]).read_text()
        assert html.escape(str(evidence["value"]), quote=False) in text, f"{evidence['value']!r} not on the page"
        return evidence["value"]
    if "trace" in source:
        return _trace_value(run_dir, source["trace"], evidence)
    if "trace_total" in source:
        return _total_value(run_dir, source["trace_total"], evidence)
    raise AssertionError(f"unknown source {source}")


@pytest.mark.parametrize("run", RUNS)
def test_every_number_a_finding_cites_is_where_it_says(site, run):
    block = run_block(site, run)
    run_dir = site / run
    checked = 0
    for item in block["findings"]["items"]:
        for e in item["evidence"]:
            if e["source"] is None:
                continue
            cited = _cited(run_dir, block, e)
            if isinstance(e["value"], str) or isinstance(cited, str):
                assert str(cited) == str(e["value"]), (item["id"], e["label"])
            else:
                assert e["value"] == pytest.approx(cited, rel=1e-6, abs=1e-6), (item["id"], e["label"])
            checked += 1
    assert checked or not block["findings"]["items"]


@pytest.mark.parametrize("run", RUNS)
def test_links_land_on_the_rows_they_name(site, run):
    run_dir = site / run
    ids: dict[str, set[str]] = {}
    for item in items(site, run):
        hrefs = [link["href"] for link in item["links"]] + [e["href"] for e in item["evidence"] if e["href"]]
        for href in hrefs:
            page, _, fragment = href.partition("#")
            assert (run_dir / page).is_file(), href
            if fragment and "=" not in fragment:  # a row id (view fragments are the timeline's)
                if page not in ids:
                    ids[page] = parse_page(run_dir / page).ids
                assert fragment in ids[page], href
            if page == "trace.html" and fragment:
                assert re.fullmatch(r"host=[^&]+(&t0=[0-9.]+&t1=[0-9.]+)?(&q=.+)?", fragment), href


# --- where findings show ----------------------------------------------------------------------------------

def test_run_page_leads_with_the_findings(site):
    page = (site / "tf_keras_input_bound" / "index.html").read_text()
    # The verdict first, the findings right under it, then the rest of the answer.
    assert page.index('class="answer') < page.index('id="findings"') < page.index("Where the time goes")
    assert 'id="finding-input.tf_data_bottleneck"' in page
    assert "MapAndBatch" in page and "<code>dataset = dataset.prefetch(tf.data.AUTOTUNE)</code>" in page
    rows = _csv_rows(site / "tf_keras_input_bound" / "data" / "findings" / "findings.csv")
    assert rows[0]["Id"] == "input.tf_data_bottleneck" and rows[0]["Severity"] == "high"
    fast = (site / "tf_keras_fast" / "index.html").read_text()
    # The fixed run's only finding is the positive one: compute-bound, nothing to fix on the input side.
    assert 'id="finding-steps.compute_bound"' in fast and "nothing to fix on the input side" in fast


def test_pull_request_summary_lists_findings_and_their_changes(site):
    from reportgen.compare.model import compare_runs
    from reportgen.compare.pr_summary import build_summary
    from reportgen.compare.sources import BuiltSite

    built = BuiltSite.open(str(site))
    text = build_summary(built, with_charts=False).markdown
    assert "### Findings" in text and "<code>input\\.tf\\_data\\_bottleneck</code>" in text
    comparison = compare_runs(built.run("tf_keras_input_bound"), built.run("tf_keras_fast"))
    document = build_summary(built, comparison, with_charts=False)
    gone = document.markdown.split("**Findings that went away**", 1)[1].split("###", 1)[0]
    assert "input\\.tf\\_data\\_bottleneck" in gone
    assert [f["id"] for f in document.data["comparison"]["findings"]["gone"]] == ["input.tf_data_bottleneck"]
    assert [f["id"] for f in document.data["comparison"]["findings"]["appeared"]] == ["steps.compute_bound"]


def test_check_fails_on_findings(site, capsys):
    from reportgen.cli.main import main

    assert main(["check", str(site), "--fail-on-finding", "high", "--runs", "tf_keras_fast"]) == 0
    assert main(["check", str(site), "--fail-on-finding", "medium", "--runs", "tf_keras_input_bound"]) == 3
    out = capsys.readouterr().out
    assert "finding input.tf_data_bottleneck (high)" in out
    assert main(["check", str(site), "--fail-on-finding", "tpu.*", "--runs", "tpu_inference_2,jax_mlp"]) == 3
    assert "tpu_inference_2: finding tpu.async_copies_dominate" in capsys.readouterr().out
    assert main(["check", str(site), "--fail-on-finding", "input.bound", "--runs", "tf_keras_input_bound"]) == 0


def test_numbers_are_finite(site):
    for run in RUNS:
        for item in items(site, run):
            for key in ("ms_per_step", "percent_of_step", "percent_of_device_time"):
                assert item[key] is None or math.isfinite(item[key])


@needs_browser
def test_run_page_and_a_row_link_in_a_browser(site, tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium(tmp_path / "profile", window="1280,800") as driver:
        driver.get((site / "tf_keras_input_bound" / "index.html").as_uri())
        assert console_errors(driver) == []
        box = driver.execute_script("var b = document.getElementById('findings').getBoundingClientRect();"
                                    "return [b.top, b.right];")
        assert box[0] < 800 and box[1] <= 1280  # above the fold, and no wider than the window
        href = driver.execute_script("return document.querySelector('#finding-input\\\\.tf_data_bottleneck "
                                     ".finding-links a').getAttribute('href')")
        assert href.startswith("input_pipeline.html#iterator-")
        driver.get((site / "tf_keras_input_bound" / href.split("#")[0]).as_uri() + "#" + href.split("#")[1])
        # The charts above the row push it down as they draw, and the page scrolls it into view again once
        # they have: wait until every chart is drawn and the row is in view.
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(
            "var row = document.getElementById(location.hash.slice(1)); var b = row.getBoundingClientRect();"
            "return [...document.querySelectorAll('[data-vega-spec]')].every("
            "  el => el.offsetParent === null || el.querySelector('svg, canvas') !== null)"
            " && 0 <= b.top && b.bottom <= window.innerHeight;"))
        top, bottom, text = driver.execute_script(
            "var row = document.getElementById(location.hash.slice(1)); var b = row.getBoundingClientRect();"
            "return [b.top, b.bottom, row.textContent];")
        assert 0 <= top and bottom <= 800 and "MapAndBatch" in text
        assert console_errors(driver) == []
