"""TF stats rows against XProf 2.24.2's framework_op_stats on every oracle run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reportgen.core.ops.kernel_reports import kernel_time_by_op
from reportgen.core.ops.views import ALL_HOSTS, run_views
from reportgen.core.tools.tf_stats import framework_op_stats_table
from tests.conftest import ORACLE, needs_shared
from tests.xprof_oracle import datatable_frame, host_op_stats, load_json, oracle_dirs

CASES = oracle_dirs()
KEY = ["host_or_device", "type", "operation"]


def _tables(run: str, host: str | None):
    parts = host_op_stats(run)
    if host is not None:
        parts = {h: p for h, p in parts.items() if h == host}
    views = run_views(parts, sorted(parts), overview_steps=False)
    op_stats = views[ALL_HOSTS if len(parts) > 1 else next(iter(parts))]
    return (framework_op_stats_table(op_stats, exclude_idle=False),
            framework_op_stats_table(op_stats, exclude_idle=True))


def _close(ours: pd.Series, theirs: pd.Series) -> np.ndarray:
    diff = (ours - theirs).abs()
    return (diff <= 1.0) | (diff <= 0.01 * theirs.abs())


@needs_shared
@pytest.mark.parametrize("run,host,folder", CASES, ids=[f"{r}/{h or 'all'}" for r, h, _ in CASES])
@pytest.mark.parametrize("mode", [0, 1], ids=["with_idle", "without_idle"])
def test_rows_occurrences_and_times(run, host, folder, mode):
    oracle = datatable_frame(load_json(folder, "framework_op_stats")[mode])
    ours = _tables(run, host)[mode]
    assert len(ours) == len(oracle)
    assert set(map(tuple, ours[KEY].to_numpy())) == set(map(tuple, oracle[KEY].to_numpy()))
    joined = ours.merge(oracle, on=KEY, suffixes=("", "_xprof"))
    assert len(joined) == len(oracle)
    assert (joined["occurrences"] == joined["occurrences_xprof"]).all()
    for col in ("total_time", "total_self_time"):
        assert _close(joined[col], joined[f"{col}_xprof"]).all(), col
    # Ranks, fractions, rates and labels follow as well.
    assert list(ours["operation"]) == list(oracle["operation"])
    for col in ("device_total_self_time_percent", "host_total_self_time_percent",
                "measured_memory_bw", "measured_flop_rate"):
        assert joined[col].to_numpy() == pytest.approx(joined[f"{col}_xprof"].to_numpy(), rel=1e-6, abs=1e-9), col
    assert (joined["bound_by"] == joined["bound_by_xprof"]).all()
    assert (joined["eager"] == joined["eager_xprof"]).all()
    if "gpu_tensorcore_utilization" in oracle:
        assert joined["gpu_tensorcore_utilization"].to_numpy() == pytest.approx(
            joined["gpu_tensorcore_utilization_xprof"].to_numpy(dtype=float), rel=1e-6, abs=1e-9)


@needs_shared
def test_gpu_tensorcore_utilization_on_the_gpu_run():
    """XProf looks device ops up among the run's kernel stats by name. The GPU
    run's kernels carry neither a `tf_op` nor an `hlo_op` stat, so (in XProf's
    kernel stats too) none names an op and every share is 0; the rule itself is
    tested on a built capture in test_core_rules.py."""
    folder = ORACLE / "gpu_multi_worker"
    kernels = datatable_frame(load_json(folder, "kernel_stats"))
    parts = host_op_stats("gpu_multi_worker")
    by_op = kernel_time_by_op(next(iter(parts.values())).kernel_reports)
    assert list(by_op.index) == sorted(set(kernels["op_name"])) == [""]
    for mode in (0, 1):
        oracle = datatable_frame(load_json(folder, "framework_op_stats")[mode])
        ours = _tables("gpu_multi_worker", None)[mode]
        assert list(ours["gpu_tensorcore_utilization"]) == list(oracle["gpu_tensorcore_utilization"].astype(float))
