"""A JAX training run on an NVIDIA H200 (XLA on GPU) against XProf 2.24.2's own output on the same file.

The capture and XProf's outputs live in the repository (`tests/captures/jax_gpu_h200/`; see its README), so
these tests run on a bare clone too. It is the only capture of XLA kernels on a GPU: its host-to-device copies
are linked to no step by a launch (XProf gives each such event the step of the last grouped event before it on
the device), and its cuDNN convolutions run as several kernels per HLO op (one occurrence each).
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from reportgen.core.events.table import EventTable
from reportgen.core.ops.device_db import xla_gpu_costs_missing
from reportgen.core.ops.kernel_reports import kernel_reports, kernel_stats_table
from reportgen.core.ops.op_stats import HostOpStats, compute_host_op_stats
from reportgen.core.ops.views import run_views
from reportgen.core.tools.input_pipeline import input_view
from reportgen.core.tools.overview import overview_view
from reportgen.core.tools.pod_viewer import hostnames_by_core, pod_stats
from reportgen.core.tools.pod_viewer import xprof_json as pod_json
from reportgen.core.tools.tf_stats import framework_op_stats_table
from reportgen.loaders.hlo import hlo_modules
from reportgen.loaders.xspace import decode_xspace
from tests.xprof_oracle import datatable_frame

FOLDER = Path(__file__).parent / "captures" / "jax_gpu_h200"
CAPTURE = FOLDER / "vm.xplane.pb"
HOST = "vm"


def _oracle(tool: str):
    return json.loads((FOLDER / "oracle" / f"{tool}.json").read_text())


@cache
def _op_stats() -> HostOpStats:
    capture = decode_xspace(str(CAPTURE), CAPTURE.read_bytes())
    return compute_host_op_stats(capture, hlo_modules(capture))


def _overview():
    views = run_views({HOST: _op_stats()}, [HOST], overview_steps=True)
    return overview_view(HOST, views[HOST])


def test_steps_times_and_breakdown_are_xprofs():
    oracle = _oracle("overview_page")
    rows = datatable_frame(oracle[1])
    steps = _overview().steps
    assert list(steps["step_name"]) == [str(s) for s in rows["stepnum"]] == [str(n) for n in range(1, 11)]
    # A step lasts from its first device event to the copies of the next step's input: ≈ 17.5 ms, not the
    # ≈ 2 ms of its kernels alone.
    assert steps["step_time_ms"].to_numpy() == pytest.approx(rows["stepTimeMs"].to_numpy(), abs=1e-3)
    assert steps["step_time_ms"].min() > 15
    assert steps["device_compute"].to_numpy() == pytest.approx(rows["deviceComputeTimeMs"].to_numpy(), abs=1e-3)
    assert steps["other"].to_numpy() == pytest.approx(rows["otherTimeMs"].to_numpy(), abs=1e-3)
    props = oracle[1]["p"]
    summary = _overview().analysis.step_time
    for name, ours in (("average", summary.average), ("minimum", summary.minimum), ("maximum", summary.maximum),
                       ("standard_deviation", summary.standard_deviation)):
        assert ours == pytest.approx(float(props[f"steptime_ms_{name}"]), abs=0.1), name


def test_input_pipeline_steps_are_xprofs():
    rows = datatable_frame(_oracle("input_pipeline_analyzer")[1])
    views = run_views({HOST: _op_stats()}, [HOST], overview_steps=True)
    steps = input_view(HOST, views[HOST]).steps
    assert list(steps["step_name"]) == list(rows["stepnum"])
    assert steps["device_compute"].to_numpy() == pytest.approx(rows["deviceComputeTimeMs"].to_numpy(), abs=1e-3)
    assert steps["step_time_ms"].to_numpy() == pytest.approx(rows["stepTimeMs"].to_numpy(), abs=1e-3)


def test_pod_viewer_steps_are_xprofs():
    expected = _oracle("pod_viewer")
    parts = [_op_stats()]
    names = hostnames_by_core([(p.environment.hostnames[0], p.core_details) for p in parts])
    combined = run_views({HOST: parts[0]}, [HOST], overview_steps=False)[HOST]
    mine = pod_json(pod_stats(combined.step_db, names, combined.environment.device_type),
                    expected["diagnostics"]["warnings"])
    ours, theirs = mine["podStatsSequence"]["podStatsMap"], expected["podStatsSequence"]["podStatsMap"]
    assert [s["stepNum"] for s in ours] == [s["stepNum"] for s in theirs]
    for step, expected_step in zip(ours, theirs):
        for core, record in expected_step["podStatsPerCore"].items():
            got = step["podStatsPerCore"][core]
            assert got["totalDurationUs"] == pytest.approx(record["totalDurationUs"], abs=1e-6)
            assert got["stepBreakdownUs"] == pytest.approx(record["stepBreakdownUs"], abs=1e-6)


@pytest.mark.parametrize("mode", [0, 1], ids=["with_idle", "without_idle"])
def test_framework_op_stats_rows_occurrences_and_times_are_xprofs(mode):
    oracle = datatable_frame(_oracle("framework_op_stats")[mode])
    op_stats = run_views({HOST: _op_stats()}, [HOST], overview_steps=False)[HOST]
    ours = framework_op_stats_table(op_stats, exclude_idle=bool(mode))
    key = ["host_or_device", "type", "operation"]
    joined = ours.merge(oracle, on=key, suffixes=("", "_xprof"))
    assert len(ours) == len(oracle) == len(joined)
    # A cuDNN convolution runs three kernels per step: three occurrences each, as XProf counts them.
    conv = joined[joined["operation"] == "jit(train_step)/jvp()/conv_general_dilated"]
    assert conv["occurrences"].tolist() == conv["occurrences_xprof"].tolist() == [36]
    assert (joined["occurrences"] == joined["occurrences_xprof"]).all()
    for column in ("total_time", "total_self_time"):
        assert (joined[column] - joined[f"{column}_xprof"]).abs().max() <= 1e-3, column
    assert list(ours["operation"]) == list(oracle["operation"])


def test_xla_ops_flops_and_bytes_are_left_out_where_xprof_runs_the_cost_analysis():
    """XProf 2.24.2 computes an XLA GPU op's FLOPs and bytes with XLA's HLO cost analysis; the kernels carry
    none, and reportgen does not run XLA: its rates stay 0, which the pages say (`xla_gpu_costs_missing`)."""
    oracle = datatable_frame(_oracle("framework_op_stats")[0])
    assert (oracle["measured_flop_rate"] > 0).any()
    op_stats = run_views({HOST: _op_stats()}, [HOST], overview_steps=False)[HOST]
    ours = framework_op_stats_table(op_stats, exclude_idle=False)
    assert (ours["measured_flop_rate"] == 0).all()
    assert xla_gpu_costs_missing(op_stats.device_db, op_stats.environment.hardware_type)


def test_kernel_stats_are_xprofs():
    capture = decode_xspace(str(CAPTURE), CAPTURE.read_bytes())
    table = kernel_stats_table(kernel_reports(EventTable(capture), hlo_modules(capture)))
    oracle = _oracle("kernel_stats")
    columns = [c["id"] for c in oracle["cols"]]
    assert len(table) == len(oracle["rows"]) > 0
    for index, row in enumerate(oracle["rows"]):
        for column, cell in zip(columns, row["c"]):
            mine, theirs = table[column].iloc[index], cell["v"]
            if isinstance(theirs, (bool, str)):
                assert mine == theirs, (index, column)
            else:
                assert math.isclose(float(mine), theirs, rel_tol=1e-12, abs_tol=1e-9), (index, column)


def test_the_capture_builds_a_site(tmp_path):
    from reportgen.pipeline.build import BuildOptions, build_site

    report = build_site([str(CAPTURE)], BuildOptions(output=str(tmp_path / "site"), jobs=1, cache=False))
    assert not report.errors
    summary = json.loads((tmp_path / "site" / "summary.json").read_text())
    (run,) = summary["runs"].values()
    assert run["overview"]["step_time_ms"]["average"] == pytest.approx(
        float(_oracle("overview_page")[1]["p"]["steptime_ms_average"]), abs=0.1)
    table = pd.read_csv(tmp_path / "site" / "jax_gpu_h200" / "data" / "tf_stats" / "framework_op_stats.csv")
    assert len(table) == len(_oracle("framework_op_stats")[0]["rows"])
    # Every page that shows XLA ops' FLOP rates says why they are 0 here.
    for page in ("tf_stats", "op_profile", "hlo_stats", "roofline_model"):
        html = (tmp_path / "site" / "jax_gpu_h200" / f"{page}.html").read_text()
        assert html.count("data-xla-gpu-costs") == 1 and "HLO cost analysis" in html, page


def test_the_cost_note_is_for_xla_gpu_runs_only(tmp_path):
    from reportgen.cli.common import sample_logdir
    from reportgen.pipeline.build import BuildOptions, build_site

    build_site([str(sample_logdir())], BuildOptions(output=str(tmp_path / "site"), jobs=1, cache=False))  # CPU runs
    pages = list((tmp_path / "site").glob("*/tf_stats.html"))
    assert pages and not any("data-xla-gpu-costs" in page.read_text() for page in pages)
