"""The input pipeline page's numbers against XProf 2.24.2's input_pipeline_analyzer on
every oracle run (and every host of multi-host runs): the step table's rows and
summary properties, the statements, the host-side input ops and time split, the
recommendations and the diagnostics."""

from __future__ import annotations

import math

import pytest

from reportgen.core.input.advice import RECOMMENDATIONS
from reportgen.core.ops.views import ALL_HOSTS, run_views
from reportgen.core.tools.input_pipeline import InputPipelineView, input_view
from tests.conftest import needs_shared
from tests.xprof_oracle import datatable_frame, host_op_stats, load_json, oracle_dirs

CASES = oracle_dirs()
IDS = [f"{r}/{h or 'all'}" for r, h, _ in CASES]
TOOL = "input_pipeline_analyzer"

# Generic step table: XProf column id → our category key.
GENERIC_COLUMNS = {
    "deviceComputeTimeMs": "device_compute", "deviceToDeviceTimeMs": "device_to_device",
    "deviceCollectivesTimeMs": "device_collectives", "hostComputeTimeMs": "host_compute",
    "kernelLaunchTimeMs": "kernel_launch", "infeedTimeMs": "input", "outfeedTimeMs": "output",
    "compileTimeMs": "compile", "otherTimeMs": "other", "stepTimeMs": "step_time_ms",
}
# Generic summary properties: XProf's prefix → our category key.
GENERIC_SUMMARIES = {
    "device_compute_time_ms": "device_compute", "device_to_device_time_ms": "device_to_device",
    "device_collectives_time_ms": "device_collectives", "infeed_time_ms": "input", "outfeed_time_ms": "output",
    "host_compute_time_ms": "host_compute", "kernel_launch_time_ms": "kernel_launch",
    "compile_time_ms": "compile", "other_time_ms": "other",
}
TPU_COLUMNS = {"tc_compute": "tcComputeTimeMs", "scv0_compute": "scv0ComputeTimeMs",
               "scv0_infeed": "scv0InfeedTimeMs", "tc_infeed": "tcInfeedTimeMs", "tc_outfeed": "tcOutfeedTimeMs",
               "tc_idle": "tcIdleTimeMs", "host_transfer": "hostTransferTimeMs"}
TPU_AVERAGES = {"tc_compute": "tc_compute_ms_average", "scv0_compute": "scv0_compute_ms_average",
                "scv0_infeed": "scv0_infeed_ms_average", "tc_infeed": "tc_infeed_ms_average",
                "tc_outfeed": "tc_outfeed_ms_average", "tc_idle": "tc_idle_ms_average",
                "host_transfer": "host_transfer_ms_average"}
BREAKDOWN_PROPS = {"enqueue": "enqueue_us", "demanded_file_read": "demanded_file_read_us",
                   "advanced_file_read": "advanced_file_read_us", "preprocessing": "preprocessing_us",
                   "unclassified": "unclassified_nonequeue_us"}


def view_of(run: str, host: str | None) -> InputPipelineView:
    parts = host_op_stats(run)
    if host is not None:
        parts = {h: p for h, p in parts.items() if h == host}
    views = run_views(parts, sorted(parts), overview_steps=True)
    label = ALL_HOSTS if len(parts) > 1 else next(iter(parts))
    return input_view(label, views[label])


def xprof_format(value: float, digits: int) -> str:
    """C's %.<digits>f as XProf prints it (a NaN from 0/0 prints as -nan)."""
    return "-nan" if math.isnan(value) else f"{value:.{digits}f}"


def close(ours: float, theirs: float) -> bool:
    """Times within 1% or 1 µs (values in ms)."""
    return abs(ours - theirs) <= max(1e-3, 0.01 * abs(theirs))


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=IDS)
def test_step_rows(run, host, folder):
    table = load_json(folder, TOOL)[1]
    rows = datatable_frame(table)
    view = view_of(run, host)
    steps = view.steps
    assert len(steps) == len(rows)
    if view.analysis.tpu:
        ids = [c["id"] for c in table["cols"]]
        assert ids[1:1 + len(view.labels)] == [TPU_COLUMNS[k] for k in view.labels]
        for (_, ours), (_, theirs) in zip(steps.iterrows(), rows.iterrows()):
            assert str(ours["step_num"]) == theirs["stepnum"]
            for key, column in TPU_COLUMNS.items():
                if key in view.labels:
                    assert close(ours[key], theirs[column]), (theirs["stepnum"], key)
            for ours_key, column in (("input_percent", "infeedPercentAverage"), ("input_percent_min",
                                     "infeedPercentMin"), ("input_percent_max", "infeedPercentMax")):
                assert ours[ours_key] == pytest.approx(theirs[column], abs=1e-6)
        return
    for (_, ours), (_, theirs) in zip(steps.iterrows(), rows.iterrows()):
        name = theirs["stepnum"]
        assert ours["step_name"] == name
        for column, key in GENERIC_COLUMNS.items():
            assert close(ours[key], theirs[column]), (name, column)
        tooltip = (f"Step {name}, duration: {ours['step_time_ms']:.2f} ms\n"
                   f"-All others: {ours['other']:.2f} ms\n-Compilation: {ours['compile']:.2f} ms\n"
                   f"-Output: {ours['output']:.2f} ms\n-Input: {ours['input']:.2f} ms\n"
                   f"-Kernel launch: {ours['kernel_launch']:.2f} ms\n-Host compute: {ours['host_compute']:.2f} ms\n"
                   f"-Device collectives: {ours['device_collectives']:.2f} ms\n"
                   f"-Device to device: {ours['device_to_device']:.2f} ms\n"
                   f"-Device compute: {ours['device_compute']:.2f} ms")
        assert tooltip == theirs["tooltip"]


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=IDS)
def test_summary_numbers_and_statements(run, host, folder):
    props = load_json(folder, TOOL)[1]["p"]
    view = view_of(run, host)
    a, b = view.analysis, view.analysis.bottleneck
    assert props["hardware_type"] == view.hardware_type
    assert props["input_conclusion"] == b.input_statement
    assert props["summary_nextstep"] == view.next_step
    if a.tpu:
        for name in ("average", "standard_deviation", "minimum", "maximum"):
            assert props[f"steptime_ms_{name}"] == xprof_format(getattr(a.step_time, name), 2), name
            assert props[f"infeed_percent_{name}"] == xprof_format(getattr(a.input_percent, name), 1), name
        for key, prop in TPU_AVERAGES.items():
            if prop in props:
                assert props[prop] == xprof_format(a.tpu_breakdown[key].average, 2), prop
        assert props["output_conclusion"] == b.output_statement
        ids = [k for k in view.labels]
        assert props["step_time_graph_column_ids"] == ",".join(
            ["stepnum", *[TPU_COLUMNS[k] for k in ids], "tooltip"])
        return
    for name in ("average", "standard_deviation", "minimum", "maximum"):
        assert props[f"steptime_ms_{name}"] == xprof_format(getattr(a.step_time, name), 1), name
    for prefix, key in GENERIC_SUMMARIES.items():
        assert props[f"{prefix}_avg"] == xprof_format(a.categories[key].average, 1), prefix
        assert props[f"{prefix}_sdv"] == xprof_format(a.categories[key].standard_deviation, 1), prefix
    for kind, statement in (("kernel_launch", b.kernel_launch_statement), ("all_other", b.all_other_statement),
                            ("device_collectives", b.device_collectives_statement)):
        assert props[f"{kind}_statement"] == statement, kind
        assert props[f"{kind}_bottleneck"] == statement, kind  # XProf puts the statement in both


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=IDS)
def test_host_side_input_ops(run, host, folder):
    table = load_json(folder, TOOL)[2]
    analysis = view_of(run, host).host_side
    expected = [[c.get("v") for c in row["c"]] for row in table["rows"]]
    ours = analysis.ops
    assert ours["op_name"].tolist() == [r[0] for r in expected]
    for (_, row), (name, count, time_ms, time_frac, self_ms, self_frac, category) in zip(ours.iterrows(), expected):
        assert row["count"] == count, name
        assert close(row["time_ms"], time_ms), name
        assert close(row["self_time_ms"], self_ms), name
        assert row["time_percent"] == pytest.approx(100 * time_frac, rel=0.01, abs=1e-4), name
        assert row["self_time_percent"] == pytest.approx(100 * self_frac, rel=0.01, abs=1e-4), name
        assert row["category"] == category, name
    breakdown = analysis.breakdown.by_key()
    for key, prop in BREAKDOWN_PROPS.items():
        assert xprof_format(breakdown[key], 3) == table["p"][prop], prop  # µs, as XProf prints them


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=IDS)
def test_max_infeed_core_recommendations_and_diagnostics(run, host, folder):
    oracle = load_json(folder, TOOL)
    view = view_of(run, host)
    core_table = oracle[0]
    if view.analysis.tpu:
        assert [c["id"] for c in core_table["cols"]] == ["index", *[str(i) for i in range(len(view.steps))]]
        rows = [[c.get("v") for c in r["c"]] for r in core_table["rows"]]
        assert rows[0] == ["Step number", *[str(s) for s in view.steps["step_num"]]]
        assert rows[1] == ["Core name", *[n or "unknown" for n in view.steps["max_infeed_core_name"]]]
    else:
        assert core_table == {"cols": [], "rows": []}
    assert [r["c"][0]["v"] for r in oracle[3]["rows"]] == RECOMMENDATIONS
    diagnostics = [[c.get("v") for c in r["c"]] for r in oracle[4]["rows"]]
    assert diagnostics == [["WARNING", w] for w in view.warnings]


@needs_shared
def test_every_oracle_run_is_covered():
    runs = {r for r, _, _ in CASES}
    assert {"tf_keras_input_bound", "tf_keras_fast", "jax_mlp", "gpu_multi_worker", "tpu_inference_2"} <= runs
    assert any(h is not None for _, h, _ in CASES)  # per-host outputs of the multi-host run
