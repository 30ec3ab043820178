"""Host-side input analysis: which host ops feed the input pipeline, what kind
of input work they are, and the input time split XProf shows
(input_pipeline.md §2.3).

Input ops are host op metrics records whose category (the op type) is a
tf.data iterator (`Dataset`), an infeed enqueue or a host-to-device memcpy,
or one of the input-pipeline stage categories. They are listed in XProf's
order (self time descending, then name) with their share of the total input
op self time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core.input_host_ops import HostOpMetricsDb, sorted_op_metrics
from reportgen.core.tf_op_names import DATASET_OP_TYPE, MEMCPY_H2D

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
class InputOpAnalysis:
    ops: pd.DataFrame  # columns: INPUT_OP_COLUMNS keys, XProf's row order
    breakdown_us: dict[str, float] = field(default_factory=lambda: dict.fromkeys(BREAKDOWN, 0.0))
    input_op_time_ps: int = 0
    enqueue_ratio: float = 0.0  # host-to-device share used to split enqueue from the rest


def is_input_op_category(category: pd.Series) -> np.ndarray:
    lowered = category.str.lower()
    return (
        category.str.startswith("InfeedEnqueue")
        | (category == DATASET_OP_TYPE)
        | (category == MEMCPY_H2D)
        | lowered.isin(list(_STAGE_CATEGORIES))
    ).to_numpy(dtype=bool)


def input_op_category(name: str, category: str) -> str:
    stage = _STAGE_CATEGORIES.get(category.lower())
    if stage is not None:
        return stage
    if category.startswith("InfeedEnqueue") or category == MEMCPY_H2D:
        return ENQUEUE
    if name.endswith(_FILE_READERS):
        return ADVANCED_FILE_READ if any(marker in name for marker in _READ_AHEAD) else DEMANDED_FILE_READ
    return PREPROCESSING


def safe_divide(a: float, b: float) -> float:
    return 0.0 if abs(b) < 1e-10 else a / b


def enqueue_ratio(db: HostOpMetricsDb, step_host_to_device_ratio: float = 0.0) -> float:
    """The share of input time spent enqueuing to the device, capped at 1.

    From the host's infeed-enqueue ops when there are any; otherwise XProf
    uses the step breakdown's host-to-device share of the step time, which
    the caller passes in (0 when no step database is available).
    """
    if db.infeed_enqueue_start_diff_ps > 0:
        ratio = safe_divide(db.infeed_enqueue_duration_ps, db.infeed_enqueue_start_diff_ps)
    else:
        ratio = step_host_to_device_ratio
    return min(1.0, ratio)


def input_op_analysis(db: HostOpMetricsDb, step_host_to_device_ratio: float = 0.0) -> InputOpAnalysis:
    ops = sorted_op_metrics(db.ops)
    ops = ops[is_input_op_category(ops["category"].astype(str))].reset_index(drop=True)
    total_ps = int(ops["self_time_ps"].sum())
    categories = [input_op_category(n, c) for n, c in zip(ops["name"], ops["category"])]
    table = pd.DataFrame(
        {
            "op_name": ops["name"].astype(str),
            "count": ops["occurrences"].astype(np.int64),
            "time_ms": ops["time_ps"] / 1e9,
            "time_percent": [100 * safe_divide(t, total_ps) for t in ops["time_ps"]],
            "self_time_ms": ops["self_time_ps"] / 1e9,
            "self_time_percent": [100 * safe_divide(t, total_ps) for t in ops["self_time_ps"]],
            "category": pd.Series(categories, dtype=object),
        }
    )
    self_us = (ops["self_time_ps"] / 1e6).groupby(pd.Series(categories, dtype=object)).sum()
    per_category = {c: float(self_us.get(c, 0.0)) for c in (ENQUEUE, DEMANDED_FILE_READ, ADVANCED_FILE_READ,
                                                           PREPROCESSING)}
    ratio = enqueue_ratio(db, step_host_to_device_ratio)
    return InputOpAnalysis(
        ops=table,
        breakdown_us=input_time_breakdown(per_category, ratio),
        input_op_time_ps=total_ps,
        enqueue_ratio=ratio,
    )


def input_time_breakdown(self_us: dict[str, float], ratio: float) -> dict[str, float]:
    """Split the input time (µs) as XProf does: the enqueue time and the ratio
    imply how much non-enqueue time there was; it is spread over the file
    read and preprocessing categories in proportion to their self time."""
    enqueue_us = self_us[ENQUEUE]
    classified_us = self_us[DEMANDED_FILE_READ] + self_us[ADVANCED_FILE_READ] + self_us[PREPROCESSING]
    non_enqueue_us = enqueue_us * (1 - ratio) / ratio if ratio != 0 else classified_us
    demanded = safe_divide(non_enqueue_us * self_us[DEMANDED_FILE_READ], classified_us)
    advanced = safe_divide(non_enqueue_us * self_us[ADVANCED_FILE_READ], classified_us)
    preprocessing = safe_divide(non_enqueue_us * self_us[PREPROCESSING], classified_us)
    return {
        "demanded_file_read": demanded,
        "advanced_file_read": advanced,
        "preprocessing": preprocessing,
        "enqueue": enqueue_us,
        "unclassified": max(0.0, non_enqueue_us - demanded - advanced - preprocessing),
    }
