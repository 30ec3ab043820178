"""Op profile, HLO op stats, roofline and pod viewer against XProf 2.24.2 on the shared captures.

Tree shape, names and every metric within 1%; the tie order of equal
siblings is XProf's unspecified partial-sort order, so siblings are matched
by name.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache

import pytest

from reportgen.core.ops.device_details import combine_device_op_details, device_op_details
from reportgen.core.ops.device_records import hlo_op_records
from reportgen.core.ops.device_run import DevicePart, DeviceRun
from reportgen.core.ops.op_stats import combine_op_stats
from reportgen.core.tools.hlo_stats import hlo_stats_table
from reportgen.core.tools.op_profile import (
    Node,
    ProfileTotals,
    build_op_profile,
    by_wasted_time,
    framework_op_type,
    hbm_fraction,
    op_profile_data,
    wasted_time_fraction,
    xprof_json,
)
from reportgen.core.tools.pod_viewer import hostnames_by_core, pod_stats
from reportgen.core.tools.pod_viewer import xprof_json as pod_json
from reportgen.core.tools.roofline import roofline_model
from reportgen.loaders.hlo import hlo_modules
from tests.conftest import ORACLE, RUNS, needs_shared
from tests.decoded import decoded_hosts
from tests.xprof_oracle import host_op_stats

REL = 0.01
DEVICE_RUNS = ["tpu_inference_2", "gpu_multi_worker"]


@cache
def device_run(run: str, host: str | None = None) -> DeviceRun:
    """The run's device ops, all hosts combined (or one host's alone)."""
    captures = [c for c in decoded_hosts(run) if host is None or c.host == host]
    stats = host_op_stats(run)
    parts = [stats[c.host] for c in captures]
    details = [device_op_details(c, p.device_db, p.environment.hardware_type == "TPU", hlo_modules(c))
               for c, p in zip(captures, parts)]
    op_stats = combine_op_stats(parts)
    combined = combine_device_op_details(details)
    return DeviceRun(op_stats=op_stats, details=combined, records=hlo_op_records(op_stats.device_db, combined),
                     hosts=[c.host for c in captures])


def oracle(run: str, tool: str):
    return json.loads((ORACLE / run / f"{tool}.json").read_text())


def close(mine, theirs) -> bool:
    if isinstance(theirs, bool) or isinstance(theirs, str):
        return mine == theirs
    return mine == pytest.approx(theirs, rel=REL, abs=1e-9)


def compare_nodes(mine: dict, theirs: dict, path: str, problems: list[str]) -> None:
    where = f"{path}/{theirs['name']}"
    if mine["name"] != theirs["name"]:
        problems.append(f"{where}: name {mine['name']!r}")
        return
    if mine["numChildren"] != theirs["numChildren"]:
        problems.append(f"{where}: numChildren {mine['numChildren']} != {theirs['numChildren']}")
    for key, value in theirs.get("metrics", {}).items():
        ours = mine.get("metrics", {}).get(key)
        ok = (ours is not None and len(ours) == len(value) and all(close(a, b) for a, b in zip(ours, value))
              if isinstance(value, list) else ours is not None and close(ours, value))
        if not ok:
            problems.append(f"{where}: {key} {ours} != {value}")
    if ("xla" in mine) != ("xla" in theirs):
        problems.append(f"{where}: xla present {('xla' in mine)} != {('xla' in theirs)}")
    elif "xla" in theirs:
        for key, value in theirs["xla"].items():
            if mine["xla"].get(key) != value:
                problems.append(f"{where}: xla.{key} {mine['xla'].get(key)!r} != {value!r}")
    if len(mine["children"]) != len(theirs["children"]):
        problems.append(f"{where}: {len(mine['children'])} children != {len(theirs['children'])}")
        return
    remaining: dict[str, list[dict]] = {}
    for child in theirs["children"]:
        remaining.setdefault(child["name"], []).append(child)
    for child in mine["children"]:
        candidates = remaining.get(child["name"])
        if not candidates:
            problems.append(f"{where}: unexpected child {child['name']!r}")
            continue
        compare_nodes(child, candidates.pop(0), where, problems)


@needs_shared
@pytest.mark.parametrize("run", DEVICE_RUNS)
@pytest.mark.parametrize("group_by,tool", [("program", "op_profile"), ("category", "op_profile.by_category")])
def test_op_profile_trees(run, group_by, tool):
    expected = oracle(run, tool)
    device = device_run(run)
    db = device.op_stats.device_db
    totals = ProfileTotals(db.total_time_ps, db.total_op_time_ps)
    assert expected["deviceType"] == device.op_stats.environment.hardware_type
    assert expected["aggDvfsTimeScaleMultiplier"] == pytest.approx(device.time_scale_multiplier)
    key = "byProgram" if group_by == "program" else "byCategory"
    for exclude, suffix in ((False, ""), (True, "ExcludeIdle")):
        tree = build_op_profile(device.records, device.details.hlo, device.details.program_names,
                                device.op_stats.perf_env, totals, group_by, exclude)
        problems: list[str] = []
        compare_nodes(xprof_json(tree), expected[key + suffix], "", problems)
        assert problems == [], f"{key + suffix}:\n" + "\n".join(problems[:20])


def _per_host_cases() -> list[tuple[str, str]]:
    return [(run, h.name) for run in DEVICE_RUNS if (ORACLE / run / "per_host").exists()
            for h in sorted((ORACLE / run / "per_host").iterdir()) if (h / "op_profile.json").exists()]


@needs_shared
@pytest.mark.parametrize("run,host", _per_host_cases(), ids=[f"{r}/{h}" for r, h in _per_host_cases()])
@pytest.mark.parametrize("group_by,tool", [("program", "op_profile"), ("category", "op_profile.by_category")])
def test_op_profile_of_each_host_alone(run, host, group_by, tool):
    """XProf shows the op profile of a multi-host run one host at a time: each host's trees against
    XProf's output for that host's file alone."""
    expected = json.loads((ORACLE / run / "per_host" / host / f"{tool}.json").read_text())
    device = device_run(run, host)
    assert device.hosts == [host]
    db = device.op_stats.device_db
    key = "byProgram" if group_by == "program" else "byCategory"
    for exclude, suffix in ((False, ""), (True, "ExcludeIdle")):
        tree = build_op_profile(device.records, device.details.hlo, device.details.program_names,
                                device.op_stats.perf_env, ProfileTotals(db.total_time_ps, db.total_op_time_ps),
                                group_by, exclude)
        problems: list[str] = []
        compare_nodes(xprof_json(tree), expected[key + suffix], "", problems)
        assert problems == [], f"{host} {key + suffix}:\n" + "\n".join(problems[:20])


@needs_shared
def test_the_op_profile_data_holds_each_host_of_a_multi_host_run():
    captures = decoded_hosts("gpu_multi_worker")
    stats = host_op_stats("gpu_multi_worker")
    parts = {c.host: DevicePart(op_stats=stats[c.host], details=device_op_details(
        c, stats[c.host].device_db, False, hlo_modules(c))) for c in captures}
    data = op_profile_data([c.host for c in captures], parts)
    assert sorted(data.per_host) == sorted(p.name for p in (ORACLE / "gpu_multi_worker" / "per_host").iterdir())
    single = decoded_hosts("tpu_inference_2")[0]
    stats = host_op_stats("tpu_inference_2")[single.host]
    alone = op_profile_data([single.host], {single.host: DevicePart(op_stats=stats, details=device_op_details(
        single, stats.device_db, True, hlo_modules(single)))})
    assert alone.per_host == {}  # one host: the combined view is that host's


# --- XProf 2.24's op table: the columns its page computes from the tree ------------------------------
# An independent reading of the rules of XProf 2.24.2's op table (op_table_entry; common/utils in its
# frontend), applied to XProf's own tree JSON, against reportgen's core on reportgen's tree.

def _xprof_time_fraction(node: dict, root: dict) -> float:
    t, r = node.get("metrics", {}).get("rawTime"), root.get("metrics", {}).get("rawTime")
    return t / r if t and r else 0.0


def _xprof_wasted(node: dict, root: dict) -> float:
    """timeFraction × (1 − max(uncapped FLOPS utilization, HBM utilization)), NaN as the browser gets it."""
    if "metrics" not in node:
        return math.nan
    fraction = _xprof_time_fraction(node, root)
    flops = node["metrics"].get("uncappedFlops", 0) / fraction if fraction else math.nan
    hbm = node["metrics"].get("bandwidthUtils", [0])[0] or math.nan
    biggest = math.nan if math.isnan(flops) or math.isnan(hbm) else max(flops, hbm)
    return fraction * (1 - biggest)


def _xprof_hbm_fraction(node: dict, root: dict) -> float:
    mine, total = node.get("metrics", {}).get("rawBytesAccessedArray"), root["metrics"]["rawBytesAccessedArray"]
    return mine[0] / total[0] if mine and total[0] else math.nan


def _xprof_op_type(provenance: str | None) -> str:
    """The browser's regexes (`.` stops at line ends): drop up to the last ':', then up to the last '/';
    if nothing is left, the last '/' element of the part before the first ':'; else "-"."""
    if not provenance:
        return "-"
    line = r"[^\n\r\u2028\u2029]*"
    text = re.sub(f"^{line}/", "", re.sub(f"^{line}:", "", provenance, count=1), count=1)
    if not text:
        text = re.sub(f"^{line}/", "", provenance.split(":")[0], count=1)
    return text or "-"


def _paired(mine: Node, theirs: dict):
    """(reportgen node, XProf node) for every node of the two trees, siblings matched by name."""
    yield mine, theirs
    remaining: dict[str, list[dict]] = {}
    for child in theirs.get("children", []):
        remaining.setdefault(child["name"], []).append(child)
    for child in mine.children:
        yield from _paired(child, remaining[child.name].pop(0))


def _same(mine: float | None, theirs: float) -> bool:
    return math.isnan(theirs) if mine is None else mine == pytest.approx(theirs, rel=REL, abs=1e-12)


@needs_shared
@pytest.mark.parametrize("run", DEVICE_RUNS)
@pytest.mark.parametrize("group_by,tool", [("program", "op_profile"), ("category", "op_profile.by_category")])
def test_op_table_columns_and_wasted_time_order_as_xprof_shows_them(run, group_by, tool):
    expected = oracle(run, tool)
    device = device_run(run)
    db = device.op_stats.device_db
    key = "byProgram" if group_by == "program" else "byCategory"
    checked = wasted = 0
    for exclude, suffix in ((False, ""), (True, "ExcludeIdle")):
        root = build_op_profile(device.records, device.details.hlo, device.details.program_names,
                                device.op_stats.perf_env, ProfileTotals(db.total_time_ps, db.total_op_time_ps),
                                group_by, exclude)
        theirs_root = expected[key + suffix]
        for mine, theirs in _paired(root, theirs_root):
            where = f"{key + suffix}/{mine.name}"
            assert _same(wasted_time_fraction(mine, root), _xprof_wasted(theirs, theirs_root)), where
            assert _same(hbm_fraction(mine, root), _xprof_hbm_fraction(theirs, theirs_root)), where
            provenance = theirs["xla"]["provenance"] if "xla" in theirs else None
            assert framework_op_type(mine.symbol.provenance if mine.symbol else "") == _xprof_op_type(provenance)
            # Order by wasted time: XProf sorts a node's children by it, most first, NaN last.
            ours = [wasted_time_fraction(c, root) for c in by_wasted_time(mine.children, root)]
            values = [_xprof_wasted(c, theirs_root) for c in theirs.get("children", [])]
            reference = sorted((v for v in values if not math.isnan(v)), reverse=True)
            assert [v for v in ours if v is not None] == pytest.approx(reference, rel=REL, abs=1e-12), where
            assert ours[len(reference):] == [None] * (len(values) - len(reference)), where
            checked += 1
            wasted += wasted_time_fraction(mine, root) is not None
    assert checked >= 2
    if run == "tpu_inference_2":
        assert wasted > 10  # the TPU capture reports HBM traffic: most rows have a wasted time


def _source_text(cell: str) -> str:
    """XProf's source cell is `<div class='source-info-cell' title='…'>file:line</div>`."""
    return cell.rsplit("'>", 1)[-1].removesuffix("</div>") if cell else ""


@needs_shared
@pytest.mark.parametrize("run", DEVICE_RUNS)
def test_hlo_stats_every_row_and_column(run):
    expected = oracle(run, "hlo_stats")
    device = device_run(run)
    env = device.op_stats.environment
    table = hlo_stats_table(device.records, device.op_stats.perf_env, env.hardware_type,
                            device.op_stats.device_db.total_time_ps)
    assert len(table) == len(expected["rows"])
    columns = [c["id"] for c in expected["cols"]]
    for i, row in enumerate(expected["rows"]):
        for column, cell in zip(columns, row["c"]):
            theirs = cell.get("v")
            ours = table.iloc[i][column]
            if column == "dma_stall_percent":
                ours = ours / 100.0  # a true percentage here, XProf's fraction there
            if column == "source_info":
                theirs = _source_text(theirs)
            assert close(ours, theirs), (i, column, ours, theirs)


@needs_shared
@pytest.mark.parametrize("run", DEVICE_RUNS)
def test_roofline_model_every_record(run):
    records_table, _diagnostics = oracle(run, "roofline_model")
    device = device_run(run)
    op_stats = device.op_stats
    env = op_stats.environment
    model = roofline_model(
        device.records, op_stats.perf_env, env.hardware_type, env.device_type, env.device_core_count,
        op_stats.device_db.total_time_ps, op_stats.step_db.step_numbers, op_stats.step_db.kind,
        has_complete_steps_db=env.hardware_type == "TPU" or len(device.hosts) > 1,
        has_merged_vmem=device.details.has_merged_vmem, has_megacore=device.details.has_megacore,
        time_scale_multiplier=device.time_scale_multiplier)
    rows = records_table["rows"]
    assert len(model.records) == len(rows)
    columns = [c["id"] for c in records_table["cols"]]
    for i, row in enumerate(rows):
        for column, cell in zip(columns, row["c"]):
            theirs = cell.get("v")
            if column == "source_info":
                theirs = _source_text(theirs)
            assert close(model.records.iloc[i][column], theirs), (i, column, model.records.iloc[i][column], theirs)
    props = records_table["p"]
    peaks = model.peaks
    assert props["device_type"] == peaks.device_type
    assert float(props["peak_flop_rate"]) == pytest.approx(peaks.peak_flop_rate, rel=1e-5)
    assert float(props["peak_hbm_bw"]) == pytest.approx(peaks.peak_hbm_bw, rel=1e-5)
    assert float(props["hbm_ridge_point"]) == pytest.approx(peaks.ridge_point(peaks.peak_hbm_bw), rel=1e-5)
    if "has_merged_vmem" in props:  # the TPU table's extra properties
        assert props["has_merged_vmem"] == str(int(peaks.has_merged_vmem))
        assert props["has_cmem"] == str(int(peaks.has_cmem))
        assert props["megacore"] == str(int(peaks.megacore))
        for name in ("vmem_read", "vmem_write", "cmem_read", "cmem_write"):
            bw = getattr(peaks, f"peak_{name}_bw")
            assert float(props[f"peak_{name}_bw"]) == pytest.approx(bw, rel=1e-5)
            assert float(props[f"{name}_ridge_point"]) == pytest.approx(peaks.ridge_point(bw), rel=1e-5)
        assert float(props["time_scale_multiplier"]) == pytest.approx(peaks.time_scale_multiplier)


@needs_shared
def test_roofline_per_step_records_are_the_same_record_under_each_step():
    """Each step's record (CPU/GPU steps: an empty per-step DB) is XProf's single-step record with its
    own step number, in step order, for any number of steps (one is checked against XProf above)."""
    device = device_run("gpu_multi_worker")
    op_stats = device.op_stats
    env = op_stats.environment

    def model(steps: list[int]):
        return roofline_model(
            device.records, op_stats.perf_env, env.hardware_type, env.device_type, env.device_core_count,
            op_stats.device_db.total_time_ps, steps, op_stats.step_db.kind, has_complete_steps_db=True,
            time_scale_multiplier=device.time_scale_multiplier).records

    one, many = model([0]), model([0, 7, 9])
    for include in (True, False):
        mine = many[many["include_infeed_outfeed"] == include]
        assert mine["step"].tolist()[-3:] == ["0", "7", "9"]
        expected = one[(one["include_infeed_outfeed"] == include) & (one["step"] == "0")]
        for step in ("0", "7", "9"):
            got = mine[mine["step"] == step].drop(columns="step").reset_index(drop=True)
            assert got.equals(expected.drop(columns="step").reset_index(drop=True)), step
    assert len(many) == len(one) + 4


def test_fused_instructions_print_as_xla_does():
    """The HLO text of instructions inside a fusion (XProf prints these with XLA itself)."""
    if "tpu_inference_2" not in RUNS:
        pytest.skip("shared captures not found")
    device = device_run("tpu_inference_2")
    fusion = device.details.hlo[(12190760917235803885 - (1 << 64), "broadcast_add_fusion.1")]
    assert [(c.name, c.category, c.provenance) for c in fusion.fused] == [
        ("constant.7", "non-fusion elementwise", ":"), ("broadcast.8", "broadcast", ":"),
        ("add.4", "non-fusion elementwise", "jit(f)/jit(main)/add:")]
    assert [c.expression for c in fusion.fused] == [
        "%constant.7 = f32[]{:T(128)} constant(1)",
        "%broadcast.8 = f32[5,1024,1024,256]{3,2,1,0:T(8,128)} broadcast(f32[]{:T(128)} %constant.7), dimensions={}",
        "%add.4 = f32[5,1024,1024,256]{3,2,1,0:T(8,128)} add(f32[5,1024,1024,256]{3,2,1,0:T(8,128)} %param_0.1, "
        "f32[5,1024,1024,256]{3,2,1,0:T(8,128)} %broadcast.8)"]


def _pod_cases() -> list[tuple[str, str | None]]:
    """(run, host) for every pod viewer XProf wrote: each run, and each host of a multi-host run alone."""
    cases = []
    for run in RUNS:
        if (ORACLE / run / "pod_viewer.json").exists():
            cases.append((run, None))
        per_host = ORACLE / run / "per_host"
        if per_host.exists():
            cases += [(run, h.name) for h in sorted(per_host.iterdir()) if (h / "pod_viewer.json").exists()]
    return cases


@needs_shared
@pytest.mark.parametrize("run,host", _pod_cases(), ids=[f"{r}/{h or 'all'}" for r, h in _pod_cases()])
def test_pod_viewer(run, host):
    folder = ORACLE / run if host is None else ORACLE / run / "per_host" / host
    expected = json.loads((folder / "pod_viewer.json").read_text())
    stats = host_op_stats(run)
    parts = [stats[c.host] for c in decoded_hosts(run) if host is None or c.host == host]
    combined = combine_op_stats(parts)
    names = hostnames_by_core([(p.environment.hostnames[0], p.core_details) for p in parts])
    mine = pod_json(pod_stats(combined.step_db, names, combined.environment.device_type),
                    expected["diagnostics"]["warnings"])
    assert mine["deviceType"] == expected["deviceType"]
    assert mine["stepBreakdownEvents"] == expected["stepBreakdownEvents"]
    ours, theirs = mine["podStatsSequence"]["podStatsMap"], expected["podStatsSequence"]["podStatsMap"]
    assert [s["stepNum"] for s in ours] == [s["stepNum"] for s in theirs]
    for step, expected_step in zip(ours, theirs):
        assert step["podStatsPerCore"].keys() == expected_step["podStatsPerCore"].keys()
        for core, record in expected_step["podStatsPerCore"].items():
            got = step["podStatsPerCore"][core]
            for key in ("hostName", "chipId", "nodeId", "stepNum", "bottleneck"):
                assert got[key] == record[key], (step["stepNum"], core, key)
            assert got["totalDurationUs"] == pytest.approx(record["totalDurationUs"], abs=1e-6)
            assert got["stepBreakdownUs"] == pytest.approx(record["stepBreakdownUs"], abs=1e-6)
