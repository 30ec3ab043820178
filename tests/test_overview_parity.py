"""Overview numbers against XProf 2.24.2's overview_page on every oracle run."""

from __future__ import annotations

import math
import re

import pytest

from reportgen.core.ops.views import ALL_HOSTS, run_views
from reportgen.core.tools.overview import overview_view
from tests.conftest import needs_shared
from tests.xprof_oracle import datatable_frame, host_op_stats, load_json, oracle_dirs

MS_TOL = 0.1  # ms (XProf prints one decimal)
PCT_TOL = 0.1  # percentage points

CASES = oracle_dirs()
GENERIC_PROPS = {
    "device_compute": "device_compute_time_ms_avg", "device_to_device": "device_to_device_time_ms_avg",
    "device_collectives": "device_collectives_time_ms_avg", "host_compute": "host_compute_time_ms_avg",
    "kernel_launch": "kernel_launch_time_ms_avg", "input": "infeed_time_ms_avg", "output": "outfeed_time_ms_avg",
    "compile": "compile_time_ms_avg", "other": "other_time_ms_avg",
}


def _view(run: str, host: str | None):
    parts = host_op_stats(run)
    if host is not None:
        parts = {h: p for h, p in parts.items() if h == host}
    views = run_views(parts, sorted(parts), overview_steps=True)
    label = ALL_HOSTS if len(parts) > 1 else next(iter(parts))
    return overview_view(label, views[label])


def _pct(text: str) -> float:
    return float(text.rstrip("%"))


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=[f"{r}/{h or 'all'}" for r, h, _ in CASES])
def test_steps_and_step_time(run, host, folder):
    oracle = load_json(folder, "overview_page")
    view = _view(run, host)
    rows = datatable_frame(oracle[1])
    assert len(view.steps) == len(rows)
    if len(rows):
        assert list(view.steps["step_name"]) == [str(s) for s in rows["stepnum"]]
        step_time = rows["stepTimeMs"] if "stepTimeMs" in rows else None
        if step_time is not None:
            assert view.steps["step_time_ms"].to_numpy() == pytest.approx(step_time.to_numpy(), abs=1e-3)
    props = oracle[1]["p"]
    summary = view.analysis.step_time
    for name, ours in (("average", summary.average), ("minimum", summary.minimum), ("maximum", summary.maximum),
                       ("standard_deviation", summary.standard_deviation)):
        assert ours == pytest.approx(float(props[f"steptime_ms_{name}"]), abs=MS_TOL), name


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=[f"{r}/{h or 'all'}" for r, h, _ in CASES])
def test_category_averages(run, host, folder):
    props = load_json(folder, "overview_page")[1]["p"]
    view = _view(run, host)
    if view.analysis.tpu:
        for key, prop in (("tc_compute", "tc_compute_ms_average"), ("tc_infeed", "tc_infeed_ms_average"),
                          ("tc_outfeed", "tc_outfeed_ms_average"), ("tc_idle", "tc_idle_ms_average")):
            assert view.analysis.categories[key].average == pytest.approx(float(props[prop]), abs=MS_TOL), key
        return
    for key, prop in GENERIC_PROPS.items():
        assert view.analysis.categories[key].average == pytest.approx(float(props[prop]), abs=MS_TOL), key


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=[f"{r}/{h or 'all'}" for r, h, _ in CASES])
def test_input_percent_and_classification(run, host, folder):
    oracle = load_json(folder, "overview_page")
    recommendation = oracle[3]["p"]
    view = _view(run, host)
    b = view.analysis.bottleneck
    assert b.input_classification == recommendation["bottleneck"]
    assert b.input_statement == recommendation["statement"]
    match = re.search(r"is (HIGHLY|MODERATELY|POTENTIALLY|NOT) input-bound because (?:only )?([0-9.]+)%",
                      recommendation["statement"])
    if match is None:
        assert b.input_bound is None
        return
    assert b.input_bound == match.group(1)
    quoted = b.all_other_percent if b.input_bound == "POTENTIALLY" else b.input_percent
    assert quoted == pytest.approx(float(match.group(2)), abs=PCT_TOL)


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=[f"{r}/{h or 'all'}" for r, h, _ in CASES])
def test_idle_and_environment(run, host, folder):
    oracle = load_json(folder, "overview_page")
    analysis_props, env = oracle[0]["p"], oracle[2]["p"]
    view = _view(run, host)
    if "device_idle_time_percent" in analysis_props:
        assert view.stats["device_idle_percent"] == pytest.approx(_pct(analysis_props["device_idle_time_percent"]),
                                                                  abs=PCT_TOL)
        assert view.stats["host_idle_percent"] == pytest.approx(_pct(analysis_props["host_idle_time_percent"]),
                                                                abs=PCT_TOL)
        assert view.stats["device_duty_cycle_percent"] == pytest.approx(
            _pct(analysis_props["device_duty_cycle_percent"]), abs=PCT_TOL)
    if "device_compute_16bit_percent" in analysis_props:
        assert view.stats["device_compute_16bit_percent"] == pytest.approx(
            _pct(analysis_props["device_compute_16bit_percent"]), abs=PCT_TOL)
    for key in ("host_tf_op_percent", "device_tf_op_percent", "host_op_time_eager_percent",
                "device_op_time_eager_percent"):
        assert view.stats[key] == pytest.approx(_pct(analysis_props[key]), abs=PCT_TOL), key
    assert view.environment["device_type"] == env["device_type"]
    assert view.environment["device_core_count"] == int(env["device_core_count"])
    assert view.environment["host_count"] == int(env["host_count"])
    assert str(view.environment["task_count"]) == env["task_count"].split(" ")[0]
    assert str(view.environment["is_training"]).lower() == env["is_training"]


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=[f"{r}/{h or 'all'}" for r, h, _ in CASES])
def test_top_device_ops(run, host, folder):
    rows = datatable_frame(load_json(folder, "overview_page")[0])
    view = _view(run, host)
    if not view.top_ops_on_device:
        assert rows.empty  # XProf lists device ops only; ours falls back to host ops
        return
    assert [op["name"] for op in view.top_ops] == list(rows["operation"])
    for op, fraction in zip(view.top_ops, rows["selfTimePercent"]):
        assert op["self_time_percent"] == pytest.approx(100 * fraction, abs=PCT_TOL)


@needs_shared
def test_identical_hosts_combine_like_xprof():
    """gpu_multi_worker's two host files are byte-identical: the combined run has
    one step whose time equals each host's, twice the cores and tasks, one host name."""
    parts = host_op_stats("gpu_multi_worker")
    assert len(parts) == 2
    combined = _view("gpu_multi_worker", None)
    single = _view("gpu_multi_worker", sorted(parts)[0])
    assert len(combined.steps) == len(single.steps) == 1
    assert combined.analysis.step_time.average == pytest.approx(single.analysis.step_time.average)
    assert combined.environment["device_core_count"] == 2 * single.environment["device_core_count"]
    assert combined.environment["task_count"] == 2 and combined.environment["host_count"] == 1
    assert not math.isnan(combined.analysis.step_time.standard_deviation)


POD_CATEGORIES = {"1": "device_compute", "2": "device_to_device", "3": "device_collectives", "4": "host_compute",
                  "5": "kernel_launch", "6": "input", "7": "output", "8": "compile", "9": "other"}


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=[f"{r}/{h or 'all'}" for r, h, _ in CASES])
def test_every_step_matches_pod_viewer(run, host, folder):
    """Before the overview's first/last rule, the step database is XProf's
    (pod_viewer shows every step, per core)."""
    from reportgen.core.tools.input_pipeline import generic_step_frame

    pod = load_json(folder, "pod_viewer")["podStatsSequence"]["podStatsMap"]
    parts = host_op_stats(run)
    if host is not None:
        parts = {h: p for h, p in parts.items() if h == host}
    views = run_views(parts, sorted(parts), overview_steps=False)
    op_stats = views[ALL_HOSTS if len(parts) > 1 else next(iter(parts))]
    steps = op_stats.step_db.steps
    assert len(op_stats.step_db) == len(pod)
    for step in pod:
        cores = {int(c): v for c, v in step["podStatsPerCore"].items()}
        ours = steps[steps["step_num"] == step["stepNum"]]
        assert sorted(ours["core"]) == sorted(cores)
        for core, xprof in cores.items():
            row = ours[ours["core"] == core]
            assert row["duration_ps"].iloc[0] / 1e6 == pytest.approx(xprof["totalDurationUs"], abs=1e-3)
            frame = generic_step_frame(op_stats.step_db.__class__(steps=row.assign(core=1)))
            for key, category in POD_CATEGORIES.items():
                assert frame[category].iloc[0] * 1e3 == pytest.approx(xprof["stepBreakdownUs"].get(key, 0),
                                                                      abs=1e-3), category
