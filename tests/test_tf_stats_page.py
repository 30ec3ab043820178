"""The TF stats page's CSV: XProf's column labels, the `(%)` columns as percentages."""

from __future__ import annotations

import pytest

from reportgen.sections.tf_stats import csv_frame
from tests.conftest import needs_shared
from tests.test_tf_stats_parity import _tables


@needs_shared
def test_csv_labels_and_percentages():
    ours = _tables("tf_keras_input_bound", None)[0]
    frame = csv_frame(ours, has_gpu=False)
    assert list(frame.columns)[:4] == ["Rank", "Host/device", "Operation Type", "Operation Name"]
    assert "GPU TensorCore utilization" not in frame.columns
    idle = frame[frame["Operation Name"] == "IDLE"].iloc[0]
    assert idle["Total self-time on Host (%)"] == pytest.approx(100 * ours.loc[idle.name,
                                                                                "host_total_self_time_percent"])
    assert 0 < idle["Total self-time on Host (%)"] <= 100
