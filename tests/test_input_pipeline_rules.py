"""XProf's input-pipeline rules on step databases built in code: the TPU path
(per-core breakdown, cores combined per step, bottleneck statements), the
per-step input share across cores, and the step diagnostics."""

from __future__ import annotations

import pandas as pd
import pytest

from reportgen.core.input.tf_data import TfDataStats
from reportgen.core.ops.op_metrics import OpMetricsDb
from reportgen.core.ops.op_stats import Diagnostics, HostOpStats, RunEnvironment
from reportgen.core.ops.perf_env import PerfEnv
from reportgen.core.steps import events as et
from reportgen.core.steps.step_db import TYPE_COLUMNS, StepDb, empty_steps
from reportgen.core.tools.input_pipeline import (
    EMPTY_INTERSECT_WARNING,
    INCOMPLETE_STEP_WARNING,
    NO_STEP_WARNING,
    HostInputPart,
    analyze_steps,
    step_warnings,
)
from reportgen.output.site import PageWriter
from reportgen.sections.base import RunContext
from reportgen.sections.input_pipeline import InputPipelineSection

MS = 1_000_000_000  # ps


def tpu_db() -> StepDb:
    steps = pd.DataFrame({"step_num": [0, 0, 1], "core": [1, 2, 1], "name": ["", "", ""],
                          "begin_ps": [0, 0, 200 * MS], "duration_ps": [100 * MS, 100 * MS, 100 * MS]})
    category_ps = {
        (0, 1): {"infeed": 30 * MS, "convolution": 50 * MS, "outfeed": 10 * MS, "IDLE": 10 * MS},
        (0, 2): {"infeed": 10 * MS, "convolution": 70 * MS, "host send": 5 * MS, "IDLE": 15 * MS},
        # SparseCoreV0 infeed is split into a wait and a transform (up to the SparseCoreV0 outfeed).
        (1, 1): {"infeed": 10 * MS, "sparsecorev0 infeed": 20 * MS, "sparsecorev0 outfeed": 5 * MS,
                 "convolution": 50 * MS},
    }
    return StepDb(steps=steps, kind="tpu", category_ps=category_ps)


def test_tpu_steps_combine_cores_like_xprof():
    a = analyze_steps(tpu_db(), "TPU", core_details={1: {"hostname": "host", "device_ordinal": 3}})
    first, second = (row for _, row in a.steps.iterrows())
    # Core 1 waits on the host 30 + 10 + 10 (idle) ms, core 2 10 + 5 + 15: the least compute is core 1's.
    assert first["tc_compute"] == pytest.approx(50)
    assert first["tc_infeed"] == pytest.approx(30) and first["max_infeed_core_name"] == "host:3"
    assert first["tc_outfeed"] == pytest.approx(5)  # average over cores
    assert first["host_transfer"] == pytest.approx(5)  # most host send/recv of a core
    assert first["tc_idle"] == pytest.approx(15)  # shortest step − everything else
    assert first["step_time_ms"] == pytest.approx(100)
    assert (first["infeed_percent_average"], first["infeed_percent_minimum"], first["infeed_percent_maximum"]) \
        == pytest.approx((20, 10, 30))
    assert first["cores"] == 2
    # Step 1: the 15 ms SparseCoreV0 wait is SparseCoreV0 compute; infeed counts wait and transform.
    assert second["scv0_compute"] == pytest.approx(15)
    assert second["tc_infeed"] == pytest.approx(30)
    assert second["tc_compute"] == pytest.approx(100 - (10 + 15) - 15)
    assert second["tc_idle"] == 0.0
    assert second["infeed_percent_maximum"] == pytest.approx(10)
    # XProf summarises each step's largest input share.
    assert a.input_percent.average == pytest.approx(20)
    assert a.step_time.maximum == pytest.approx(100)


def test_tpu_bottleneck_statements():
    b = analyze_steps(tpu_db(), "TPU").bottleneck
    total = 100 + (60 + 15 + 30)
    assert b.input_percent == pytest.approx(100 * 60 / total)
    assert b.input_bound == "HIGHLY"
    assert b.output_classification == "device" and b.output_statement == ""  # 5 of 205 ms: under 5%
    assert b.tpu_idle_classification == "yes"
    assert b.tpu_idle_statement.startswith(f"{100 * 15 / total:.1f} % of the total step time sampled is due to host")
    assert b.scv0_classification == "moderate"  # 15 of 205 ms: under 10%
    assert b.scv0_statement == (f"Also, {100 * 15 / total:.1f} % of the total step time sampled is spent on the "
                                "SparseCoreV0 compute. You may also want to reduce the SparseCoreV0 compute time.")
    assert b.all_reduce_classification == "no"
    assert b.compute_percent == pytest.approx(100 - b.input_percent - b.output_percent - b.idle_percent)


def test_tpu_without_steps():
    a = analyze_steps(StepDb(kind="tpu"), "TPU")
    assert a.steps.empty and a.bottleneck.input_classification == "unknown"
    assert a.bottleneck.output_statement == "" and a.input_percent.average == 0.0


def generic_db(cores: dict[int, tuple[int, int]]) -> StepDb:
    """One step on each core: core → (duration ms, input-wait ms); the rest is host compute."""
    rows = []
    for core, (duration, wait) in cores.items():
        row = {"step_num": 0, "core": core, "name": "s", "begin_ps": 0, "duration_ps": duration * MS}
        row.update(dict.fromkeys(TYPE_COLUMNS, 0))
        row[f"t{et.HOST_WAIT_INPUT}"] = wait * MS
        row[f"t{et.HOST_COMPUTE}"] = (duration - wait) * MS
        rows.append(row)
    return StepDb(steps=pd.DataFrame(rows))


def test_input_share_per_step_with_its_range_over_cores():
    a = analyze_steps(generic_db({1: (100, 20), 1001: (80, 40)}), "CPU_ONLY")
    step = a.steps.iloc[0]
    assert step["input_percent"] == pytest.approx(20)  # XProf reads core 1
    assert (step["input_percent_min"], step["input_percent_max"], step["cores"]) == pytest.approx((20, 50, 2))
    assert a.step_time.average == pytest.approx(100)  # the longest core
    single = analyze_steps(generic_db({1: (100, 20)}), "CPU_ONLY").steps.iloc[0]
    assert (single["input_percent_min"], single["input_percent_max"], single["cores"]) == pytest.approx((20, 20, 1))


def test_step_warnings():
    assert step_warnings(StepDb()) == [NO_STEP_WARNING]
    assert step_warnings(StepDb(empty_intersect=True)) == [EMPTY_INTERSECT_WARNING]
    assert step_warnings(StepDb(steps=empty_steps(), use_incomplete_step=True)) == [INCOMPLETE_STEP_WARNING]
    dropped = step_warnings(StepDb(num_steps_dropped=3))
    assert dropped[1].startswith("3 steps dropped.")
    assert step_warnings(generic_db({1: (10, 1)})) == []


def test_tpu_page_with_steps(tmp_path):
    """The TPU branch of the page: its categories, the core with the most input time, the summary block."""
    op_stats = HostOpStats(
        host="tpu-host", host_db=OpMetricsDb(), device_db=OpMetricsDb(), step_db=tpu_db(),
        environment=RunEnvironment(["tpu-host"], 1, 1, "TPU v4", 2, "TPU"), perf_env=PerfEnv(),
        diagnostics=Diagnostics(), core_details={1: {"hostname": "tpu-host", "device_ordinal": 3}})
    section = InputPipelineSection()
    data = section.combine(RunContext("tpu", []), {"tpu-host": HostInputPart(op_stats, TfDataStats("tpu-host"))})
    block = section.summary(data)
    assert block.input_bound == "HIGHLY" and block.input_percent == pytest.approx(100 * 60 / 205)
    assert list(data.main.labels) == ["tc_compute", "scv0_compute", "scv0_infeed", "tc_infeed", "tc_outfeed",
                                      "tc_idle", "host_transfer"]
    assets = dict.fromkeys(("css", "vega", "js"), "assets/unused")  # the page alone, no bundle needed
    section.render(data, PageWriter(site_dir=tmp_path, assets=assets, folder="tpu", run="tpu"))
    html = (tmp_path / "tpu" / "input_pipeline.html").read_text()
    assert "TensorCore idle" in html and "tpu-host:3" in html and "host-training loop" in html
    assert '<a href="https://www.tensorflow.org/guide/tpu#improving_performance_by_multiple_steps_within_tffunction"' \
        in html
    steps = (tmp_path / "tpu" / "data" / "input_pipeline" / "steps.csv").read_text()
    assert "Core with the most input time" in steps.splitlines()[0]
