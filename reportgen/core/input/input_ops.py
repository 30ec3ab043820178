"""Host-side input analysis: which host ops feed the input pipeline, what kind
of input work they are, and the input time split XProf shows
(docs/xprof/input_pipeline.md §2.3).

Input ops are records of the host op metrics database (`OpStats.host_db`)
whose category (the op type) is a tf.data iterator (`Dataset`), an infeed
enqueue, a host-to-device memcpy, or one of the input-pipeline stage
categories. They are listed in XProf's order (self time descending, then
name) with their share of the total input op self time.

    analysis = input_op_analysis(op_stats.host_db, h2d_ms_avg, step_ms_avg, generic=True)
    analysis.ops        # the input op table (INPUT_OP_COLUMNS)
    analysis.breakdown  # InputTimeBreakdown: µs per input category
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core.events.tf_op import DATASET_TYPE, MEMCPY_H2D, is_infeed_enqueue_type
from reportgen.core.frames import empty_frame
from reportgen.core.ops.op_metrics import OpMetricsDb, safe_divide

ENQUEUE = "Enqueue"
DEMANDED_FILE_READ = "Demanded file read"
ADVANCED_FILE_READ = "Advanced file read"
PREPROCESSING = "Preprocessing"
UNKNOWN = "Unknown"

# Stage categories written by newer input pipelines (compared lower-cased).
_STAGE_CATEGORIES = {"enqueue": ENQUEUE, "read": DEMANDED_FILE_READ, "preprocessing": PREPROCESSING,
                     "unknown": UNKNOWN}
_FILE_READERS = ("::TFRecord", "::TextLine", "::FixedLengthRecord", "::SSTable", "::RecordIO", "::ArrayRecord")
_READ_AHEAD = ("::MemoryReader", "::MemoryWriter", "::Interleave", "::Prefetch", "::ParallelMap")

# XProf's host table, in its column order and with its labels (percent
# columns hold percentages here, where XProf writes fractions).
INPUT_OP_COLUMNS = {
    "op_name": "Input Op",
    "count": "Count",
    "time_ms": "Total Time (in ms)",
    "time_percent": "Total Time (as % of total input-processing time)",
    "self_time_ms": "Total Self Time (in ms)",
    "self_time_percent": "Total Self Time (as % of total input-processing time)",
    "category": "Category",
}

# The input time split, in the order the page lists it: key → label.
BREAKDOWN = {
    "demanded_file_read": "Reading data from files on demand",
    "advanced_file_read": "Reading data from files in advance (caching, prefetching, interleaving)",
    "preprocessing": "Data preprocessing",
    "enqueue": "Enqueuing data onto the device",
    "unclassified": "Other data reading or processing (unclassified)",
}


@dataclass
class InputTimeBreakdown:
    """XProf's InputTimeBreakdown (µs)."""

    enqueue_us: float = 0.0
    demanded_file_read_us: float = 0.0
    advanced_file_read_us: float = 0.0
    preprocessing_us: float = 0.0
    unclassified_non_enqueue_us: float = 0.0

    @property
    def uses_tf_data(self) -> bool:
        """XProf's test for "tf.data is in use" (next step and kernel-launch statement)."""
        return self.demanded_file_read_us > 0 or self.advanced_file_read_us > 0 or self.preprocessing_us > 0

    def by_key(self) -> dict[str, float]:
        """µs per BREAKDOWN key, in page order."""
        return {
            "demanded_file_read": self.demanded_file_read_us,
            "advanced_file_read": self.advanced_file_read_us,
            "preprocessing": self.preprocessing_us,
            "enqueue": self.enqueue_us,
            "unclassified": self.unclassified_non_enqueue_us,
        }


@dataclass
class InputOpAnalysis:
    ops: pd.DataFrame  # columns: INPUT_OP_COLUMNS keys, XProf's row order
    breakdown: InputTimeBreakdown = field(default_factory=InputTimeBreakdown)
    input_op_time_ps: int = 0
    enqueue_ratio: float = 0.0  # host-to-device share used to split enqueue from the rest


def input_op_category(name: str, category: str) -> str | None:
    """The input category of a host op record, None when it is not an input op."""
    stage = _STAGE_CATEGORIES.get(category.lower())
    if stage is not None:
        return stage
    if is_infeed_enqueue_type(category) or category == MEMCPY_H2D:
        return ENQUEUE
    if category != DATASET_TYPE:
        return None
    if name.endswith(_FILE_READERS):
        return ADVANCED_FILE_READ if any(marker in name for marker in _READ_AHEAD) else DEMANDED_FILE_READ
    return PREPROCESSING


def enqueue_ratio(host_db: OpMetricsDb, host_to_device_ms_avg: float = 0.0, step_time_ms_avg: float = 0.0,
                  generic: bool = False) -> float:
    """The share of input time spent enqueuing to the device, capped at 1.

    From the host's infeed-enqueue ops when there are any; otherwise, on the
    generic (CPU/GPU) path, the steps' average host-to-device time over the
    average step time; otherwise 0.
    """
    if host_db.host_infeed_enq_start_diff_ps > 0:
        ratio = safe_divide(host_db.host_infeed_enq_duration_ps, host_db.host_infeed_enq_start_diff_ps)
    elif step_time_ms_avg > 0 and generic:
        ratio = safe_divide(host_to_device_ms_avg, step_time_ms_avg)
    else:
        ratio = 0.0
    return min(1.0, ratio)


def split_input_time(self_us: dict[str, float], ratio: float) -> InputTimeBreakdown:
    """Split the input time (µs) as XProf does: the enqueue time and the ratio
    imply how much non-enqueue time there was; it is spread over the file
    read and preprocessing categories in proportion to their self time."""
    enqueue = self_us.get(ENQUEUE, 0.0)
    demanded = self_us.get(DEMANDED_FILE_READ, 0.0)
    advanced = self_us.get(ADVANCED_FILE_READ, 0.0)
    preprocessing = self_us.get(PREPROCESSING, 0.0)
    classified = demanded + advanced + preprocessing
    non_enqueue = enqueue * (1 - ratio) / ratio if ratio != 0 else classified
    out = InputTimeBreakdown(
        enqueue_us=enqueue,
        demanded_file_read_us=safe_divide(non_enqueue * demanded, classified),
        advanced_file_read_us=safe_divide(non_enqueue * advanced, classified),
        preprocessing_us=safe_divide(non_enqueue * preprocessing, classified),
    )
    out.unclassified_non_enqueue_us = max(
        0.0, non_enqueue - out.demanded_file_read_us - out.advanced_file_read_us - out.preprocessing_us)
    return out


@empty_frame
def empty_input_ops() -> pd.DataFrame:
    return pd.DataFrame({"op_name": pd.Series(dtype=object), "count": pd.Series(dtype=np.int64),
                         "time_ms": pd.Series(dtype=float), "time_percent": pd.Series(dtype=float),
                         "self_time_ms": pd.Series(dtype=float), "self_time_percent": pd.Series(dtype=float),
                         "category": pd.Series(dtype=object)})


def input_op_analysis(host_db: OpMetricsDb, host_to_device_ms_avg: float = 0.0, step_time_ms_avg: float = 0.0,
                      generic: bool = False) -> InputOpAnalysis:
    """XProf's host-side input analysis of a (combined) host op database. The
    step averages feed the enqueue ratio where the host has no infeed enqueues."""
    ratio = enqueue_ratio(host_db, host_to_device_ms_avg, step_time_ms_avg, generic)
    ops = host_db.sorted()
    categories = [input_op_category(str(n), str(c)) for n, c in zip(ops["name"], ops["category"])]
    keep = np.array([c is not None for c in categories], dtype=bool)
    if not keep.any():
        return InputOpAnalysis(empty_input_ops(), enqueue_ratio=ratio)
    ops = ops[keep].reset_index(drop=True)
    categories = pd.Series([c for c in categories if c is not None], dtype=object)
    total_ps = int(ops["self_time_ps"].sum())
    time_ps = ops["time_ps"].to_numpy(np.float64)
    self_ps = ops["self_time_ps"].to_numpy(np.float64)
    total = float(total_ps) if total_ps else np.inf  # SafeDivide: 0 when there is no input time
    table = pd.DataFrame({
        "op_name": ops["name"].astype(str).to_numpy(object),
        "count": ops["occurrences"].to_numpy(np.int64),
        "time_ms": time_ps / 1e9,
        "time_percent": 100 * (time_ps / total),
        "self_time_ms": self_ps / 1e9,
        "self_time_percent": 100 * (self_ps / total),
        "category": categories.to_numpy(object),
    })
    self_us = (pd.Series(self_ps / 1e6).groupby(categories).sum()).to_dict()
    return InputOpAnalysis(table, split_input_time(self_us, ratio), total_ps, ratio)
