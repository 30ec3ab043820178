"""JAX training runs on an NVIDIA H200 (XLA on GPU) against XProf 2.24.2's own output on the same files.

The captures and XProf's outputs live in the repository (`tests/captures/<run>/`; see their READMEs), so these
tests run on a bare clone too:

* `jax_gpu_h200`: a small CNN; its host-to-device copies are linked to no step by a launch (XProf gives each such
  event the step of the last grouped event before it on the device), and its cuDNN convolutions run as several
  kernels per HLO op (one occurrence each);
* `jax_lm_h200`: a transformer language model in bf16, its layers under `lax.scan` (an XLA while loop), Adam.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from reportgen.core.ops.device_db import xla_gpu_costs_missing
from reportgen.core.ops.kernel_reports import kernel_stats_table
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

CAPTURES = Path(__file__).parent / "captures"
RUNS = ["jax_gpu_h200", "jax_lm_h200"]
HOST = "vm"


def _capture_file(run: str) -> Path:
    (path,) = (CAPTURES / run).glob("vm.xplane.pb*")
    return path


def _oracle(run: str, tool: str):
    return json.loads((CAPTURES / run / "oracle" / f"{tool}.json").read_text())


@cache
def _capture(run: str):
    path = _capture_file(run)
    return decode_xspace(str(path), path.read_bytes())  # a .gz file is inflated by the loader


@cache
def _op_stats(run: str) -> HostOpStats:
    capture = _capture(run)
    return compute_host_op_stats(capture, hlo_modules(capture))


def _view(run: str, overview_steps: bool):
    return run_views({HOST: _op_stats(run)}, [HOST], overview_steps=overview_steps)[HOST]


@pytest.mark.parametrize("run", RUNS)
def test_steps_times_and_breakdown_are_xprofs(run):
    oracle = _oracle(run, "overview_page")
    rows = datatable_frame(oracle[1])
    overview = overview_view(HOST, _view(run, overview_steps=True))
    steps = overview.steps
    assert len(rows) >= 8
    assert list(steps["step_name"]) == [str(s) for s in rows["stepnum"]]
    for column, key in (("stepTimeMs", "step_time_ms"), ("deviceComputeTimeMs", "device_compute"),
                        ("otherTimeMs", "other"), ("hostComputeTimeMs", "host_compute"),
                        ("kernelLaunchTimeMs", "kernel_launch"), ("infeedTimeMs", "input")):
        assert steps[key].to_numpy() == pytest.approx(rows[column].to_numpy(), abs=1e-3), column
    props = oracle[1]["p"]
    summary = overview.analysis.step_time
    for name, ours in (("average", summary.average), ("minimum", summary.minimum), ("maximum", summary.maximum),
                       ("standard_deviation", summary.standard_deviation)):
        assert ours == pytest.approx(float(props[f"steptime_ms_{name}"]), abs=0.1), name


def test_a_step_spans_the_next_inputs_copies_as_in_xprof():
    # The CNN's steps last from their first kernel to the copies of the next step's input: ≈ 17.5 ms, not the
    # ≈ 2 ms of their kernels alone (the copies, linked to no step, join the step before them).
    steps = overview_view(HOST, _view("jax_gpu_h200", overview_steps=True)).steps
    assert list(steps["step_name"]) == [str(n) for n in range(1, 11)]
    assert steps["step_time_ms"].min() > 15


@pytest.mark.parametrize("run", RUNS)
def test_input_pipeline_steps_are_xprofs(run):
    rows = datatable_frame(_oracle(run, "input_pipeline_analyzer")[1])
    steps = input_view(HOST, _view(run, overview_steps=True)).steps
    assert list(steps["step_name"]) == list(rows["stepnum"])
    assert steps["device_compute"].to_numpy() == pytest.approx(rows["deviceComputeTimeMs"].to_numpy(), abs=1e-3)
    assert steps["step_time_ms"].to_numpy() == pytest.approx(rows["stepTimeMs"].to_numpy(), abs=1e-3)


@pytest.mark.parametrize("run", RUNS)
def test_pod_viewer_steps_are_xprofs(run):
    expected = _oracle(run, "pod_viewer")
    op_stats = _op_stats(run)
    names = hostnames_by_core([(op_stats.environment.hostnames[0], op_stats.core_details)])
    combined = _view(run, overview_steps=False)
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
@pytest.mark.parametrize("run", RUNS)
def test_framework_op_stats_rows_occurrences_and_times_are_xprofs(run, mode):
    oracle = datatable_frame(_oracle(run, "framework_op_stats")[mode])
    ours = framework_op_stats_table(_view(run, overview_steps=False), exclude_idle=bool(mode))
    key = ["host_or_device", "type", "operation"]
    joined = ours.merge(oracle, on=key, suffixes=("", "_xprof"))
    assert len(ours) == len(oracle) == len(joined)
    assert (joined["occurrences"] == joined["occurrences_xprof"]).all()
    for column in ("total_time", "total_self_time"):
        assert (joined[column] - joined[f"{column}_xprof"]).abs().max() <= 1e-3, column
    assert list(ours["operation"]) == list(oracle["operation"])


def test_each_kernel_of_an_hlo_op_is_an_occurrence():
    # A cuDNN convolution runs three kernels per step: 36 occurrences over 12 steps, as XProf counts them.
    ours = framework_op_stats_table(_view("jax_gpu_h200", overview_steps=False), exclude_idle=False)
    conv = ours[ours["operation"] == "jit(train_step)/jvp()/conv_general_dilated"]
    assert conv["occurrences"].tolist() == [36]


@pytest.mark.parametrize("run", RUNS)
def test_xla_ops_flops_and_bytes_are_left_out_where_xprof_runs_the_cost_analysis(run):
    """XProf 2.24.2 computes an XLA GPU op's FLOPs and bytes with XLA's HLO cost analysis; the kernels carry
    none, and reportgen does not run XLA: its rates stay 0, which the pages say (`xla_gpu_costs_missing`)."""
    oracle = datatable_frame(_oracle(run, "framework_op_stats")[0])
    assert ((oracle["measured_flop_rate"] > 0) | (oracle["measured_memory_bw"] > 0)).any()
    op_stats = _view(run, overview_steps=False)
    ours = framework_op_stats_table(op_stats, exclude_idle=False)
    assert (ours["measured_flop_rate"] == 0).all() and (ours["measured_memory_bw"] == 0).all()
    assert xla_gpu_costs_missing(op_stats.device_db, op_stats.environment.hardware_type)


@pytest.mark.parametrize("run", RUNS)
def test_kernel_stats_are_xprofs(run):
    table = kernel_stats_table(_op_stats(run).kernel_reports)  # the host's reports, as the build computes them
    oracle = _oracle(run, "kernel_stats")
    columns = [c["id"] for c in oracle["cols"]]
    assert len(table) == len(oracle["rows"]) > 0
    for index, row in enumerate(oracle["rows"]):
        for column, cell in zip(columns, row["c"]):
            mine, theirs = table[column].iloc[index], cell["v"]
            if isinstance(theirs, (bool, str)):
                assert mine == theirs, (index, column)
            else:
                assert math.isclose(float(mine), theirs, rel_tol=1e-12, abs_tol=1e-9), (index, column)


def test_the_captures_build_a_site_that_says_where_it_differs(tmp_path):
    from reportgen.pipeline.build import BuildOptions, build_site

    report = build_site([str(_capture_file(run)) for run in RUNS],
                        BuildOptions(output=str(tmp_path / "site"), jobs=1, cache=False))
    assert not report.errors
    summary = json.loads((tmp_path / "site" / "summary.json").read_text())
    assert sorted(summary["runs"]) == RUNS
    for run in RUNS:
        average = float(_oracle(run, "overview_page")[1]["p"]["steptime_ms_average"])
        assert summary["runs"][run]["overview"]["step_time_ms"]["average"] == pytest.approx(average, abs=0.1)
        table = pd.read_csv(tmp_path / "site" / run / "data" / "tf_stats" / "framework_op_stats.csv")
        assert len(table) == len(_oracle(run, "framework_op_stats")[0]["rows"])
        # XProf's 16-/32-bit split counts every XLA kernel as 32-bit: no finding is drawn from it (the language
        # model computes in bfloat16). The CNN's TF32 convolution kernels use TensorCores; its first convolution
        # (3 input channels) runs cuDNN's 32-bit engine, which the finding names.
        items = {f["id"]: f for f in summary["runs"][run]["findings"]["items"]}
        assert "device.fp32_compute" not in items
        if run == "jax_gpu_h200":
            # wgrad_alg0_engine alone: cuDNN's layout conversion and workspace kernels of that convolution do no
            # math and are not counted as missed.
            assert items["gpu.tensor_cores_unused"]["percent_of_device_time"] == pytest.approx(12.7, abs=0.1)
        # Every page that shows XLA ops' FLOP rates says why they are 0 here.
        for page in ("tf_stats", "op_profile", "hlo_stats", "roofline_model"):
            html = (tmp_path / "site" / run / f"{page}.html").read_text()
            assert html.count("data-xla-gpu-costs") == 1 and "HLO cost analysis" in html, (run, page)


def test_the_cost_note_is_for_xla_gpu_runs_only():
    from tests.clirun import sample_site_build

    cwd, build = sample_site_build()  # the bundled CPU runs, built once for the session's tests
    assert build.returncode == 0, build.stderr
    pages = list((cwd / "site").glob("*/tf_stats.html"))
    assert pages and not any("data-xla-gpu-costs" in page.read_text() for page in pages)
