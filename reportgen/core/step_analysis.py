"""Step-time analysis shared by the overview and input-pipeline pages.

XProf's input-pipeline analysis (docs/xprof/input_pipeline.md §1–3): per-step
category times in milliseconds, their summaries (XProf's `Stat` quirks
included) and the bottleneck classification (HIGHLY / MODERATELY /
POTENTIALLY / NOT input-bound) with its statement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reportgen.core import step_events as et
from reportgen.core.op_metrics import safe_divide
from reportgen.core.step_db import DEFAULT_GPU_CORE, StepDb

# Generic categories: (key, XProf label, event types summed).
GENERIC_CATEGORIES = [
    ("device_compute", "Device compute", (et.DEVICE_COMPUTE_16, et.DEVICE_COMPUTE_32)),
    ("device_to_device", "Device to device", (et.DEVICE_TO_DEVICE, et.DEVICE_WAIT_DEVICE)),
    ("device_collectives", "Device collective communication", (et.DEVICE_COLLECTIVES,)),
    ("host_compute", "Host compute", (et.HOST_COMPUTE,)),
    ("kernel_launch", "Kernel launch", (et.HOST_PREPARE,)),
    ("input", "Input", (et.HOST_WAIT_INPUT, et.HOST_TO_DEVICE, et.DEVICE_WAIT_HOST)),
    ("output", "Output", (et.DEVICE_TO_HOST,)),
    ("compile", "Compilation", (et.HOST_COMPILE,)),
    ("other", "All others", (et.UNKNOWN_TIME,)),
]
CATEGORY_KEYS = [k for k, _, _ in GENERIC_CATEGORIES]
CATEGORY_LABELS = {k: label for k, label, _ in GENERIC_CATEGORIES}

HIGHLY_INPUT_BOUND = 20.0
MODERATELY_INPUT_BOUND = 5.0
MODERATELY_ALL_OTHER_BOUND = 3.0
HIGH_THRESHOLD = 15.0
MODERATE_THRESHOLD = 3.0

_DOUBLE_MIN = np.finfo(np.float64).tiny  # std::numeric_limits<double>::min()


@dataclass
class StepSummary:
    """XProf's StepSummary of a `Stat<double>` (input_pipeline.md §1)."""

    average: float = 0.0
    standard_deviation: float = 0.0
    minimum: float = 0.0
    maximum: float = 0.0

    @classmethod
    def of(cls, values) -> StepSummary:
        v = np.asarray(values, np.float64)
        if len(v) == 0:
            return cls()
        # Stat starts with max = the smallest positive double, so an all-zero
        # series is not "all same" and a single zero gives 0/0 = NaN.
        vmax = max(float(v.max()), _DOUBLE_MIN)
        vmin = float(v.min())
        n = len(v)
        if vmin == vmax:
            variance = 0.0
        elif n == 1:
            variance = math.nan
        else:
            total = float(v.sum())
            variance = (float((v * v).sum()) - total * total / n) / (n - 1)
        sd = math.sqrt(variance) if variance >= 0 else math.nan
        return cls(float(v.mean()) if n else 0.0, sd, vmin, float(v.max()))


@dataclass
class Bottleneck:
    input_classification: str = "unknown"  # host / both / device / unknown
    input_statement: str = ""
    input_bound: str | None = None  # HIGHLY / MODERATELY / POTENTIALLY / NOT
    input_percent: float = 0.0
    output_percent: float = 0.0
    idle_percent: float = 0.0
    compute_percent: float = 0.0
    all_other_percent: float = 0.0
    kernel_launch_classification: str = "no"
    kernel_launch_statement: str = ""
    all_other_classification: str = "no"
    all_other_statement: str = ""
    device_collectives_classification: str = "no"
    device_collectives_statement: str = ""


@dataclass
class StepAnalysis:
    """Per-step category times (ms) and their summaries.

    steps: one row per step: step_num, step_name, step_time_ms and one column per
    category key (`device_compute`, …, `other`, in XProf's order).
    """

    hardware_type: str
    steps: pd.DataFrame
    step_time: StepSummary
    categories: dict[str, StepSummary] = field(default_factory=dict)
    input_percent: StepSummary = field(default_factory=StepSummary)
    bottleneck: Bottleneck = field(default_factory=Bottleneck)
    tpu: bool = False
    input_breakdown: InputTimeBreakdown | None = None


NO_STEP_STATEMENT = "No step time measured. Therefore we cannot tell where the performance bottleneck is."


def _step_times_ms(step_db: StepDb) -> np.ndarray:
    """Per step: max duration over cores below the SparseCore range (XProf's step_time_summary)."""
    s = step_db.steps
    if s.empty:
        return np.zeros(0)
    tc = s[s["core"] < 1_000_000]
    per = tc.groupby("step_num", sort=False)["duration_ps"].max().reindex(step_db.step_numbers).fillna(0)
    return per.to_numpy(np.float64) / 1e9


def _host_to_device_ms(step_db: StepDb) -> np.ndarray:
    core = step_db.steps[step_db.steps["core"] == DEFAULT_GPU_CORE]
    ps = core[f"t{et.HOST_TO_DEVICE}"].to_numpy(np.float64) + core[f"t{et.DEVICE_WAIT_HOST}"].to_numpy(np.float64)
    return ps / 1e9


def generic_step_frame(step_db: StepDb) -> pd.DataFrame:
    s = step_db.steps
    core = s[s["core"] == DEFAULT_GPU_CORE]
    out = pd.DataFrame({
        "step_num": core["step_num"].to_numpy(np.int64),
        "step_name": [n if n else str(k) for n, k in zip(core["name"], core["step_num"])],
        "step_time_ms": core["duration_ps"].to_numpy(np.float64) / 1e9,
    })
    for key, _, types in GENERIC_CATEGORIES:
        out[key] = sum(core[f"t{t}"].to_numpy(np.float64) for t in types) / 1e9
    return out


def classify_input(input_percent: float, all_other_percent: float) -> tuple[str, str, str]:
    """(classification, statement, input-bound word) — XProf's InputAnalysis."""
    if input_percent >= HIGHLY_INPUT_BOUND:
        return ("host", f"Your program is HIGHLY input-bound because {input_percent:.1f}% of the total step time "
                "sampled is waiting for input. Therefore, you should first focus on reducing the input time.",
                "HIGHLY")
    if input_percent >= MODERATELY_INPUT_BOUND:
        return ("both", f"Your program is MODERATELY input-bound because {input_percent:.1f}% of the total step "
                "time sampled is waiting for input. Therefore, you would need to reduce both the input time and "
                "other time.", "MODERATELY")
    if all_other_percent >= MODERATELY_ALL_OTHER_BOUND:
        return ("both", f"Your program is POTENTIALLY input-bound because {all_other_percent:.1f}% of the total "
                "step time sampled is spent on 'All Others' time (which could be due to I/O or Python execution "
                "or both).", "POTENTIALLY")
    return ("device", f"Your program is NOT input-bound because only {input_percent:.1f}% of the total step time "
            "sampled is waiting for input. Therefore, you should focus on reducing other time.", "NOT")


def _level(percent: float) -> str:
    return "high" if percent >= HIGH_THRESHOLD else "moderate" if percent >= MODERATE_THRESHOLD else "no"


def generic_bottleneck(steps: pd.DataFrame, uses_tf_data: bool) -> Bottleneck:
    total = float(steps["step_time_ms"].sum()) if len(steps) else 0.0
    if total == 0:
        return Bottleneck(input_statement=NO_STEP_STATEMENT)
    pct = {k: 100.0 * float(steps[k].sum()) / total for k in CATEGORY_KEYS}
    input_p, output_p = pct["input"], pct["output"]
    compute_p, coll_p = pct["device_compute"], pct["device_collectives"]
    idle_p = max(0.0, 100.0 - input_p - output_p - compute_p - coll_p)
    cls, statement, word = classify_input(input_p, pct["other"])
    b = Bottleneck(cls, statement, word, input_p, output_p, idle_p, compute_p, pct["other"])
    b.device_collectives_classification = _level(coll_p)
    if b.device_collectives_classification != "no":
        b.device_collectives_statement = (f"{coll_p:.1f} % of the total step time sampled is spent on 'Device "
                                          "Collective Communication'.")
    kl = pct["kernel_launch"]
    b.kernel_launch_classification = _level(kl)
    if b.kernel_launch_classification != "no":
        b.kernel_launch_statement = f"{kl:.1f} % of the total step time sampled is spent on 'Kernel Launch'."
        if uses_tf_data:
            b.kernel_launch_statement += (" It could be due to CPU contention with tf.data. In this case, you may "
                                          "try to set the environment variable TF_GPU_THREAD_MODE=gpu_private.")
    if word != "POTENTIALLY":
        b.all_other_classification = _level(pct["other"])
        if b.all_other_classification != "no":
            b.all_other_statement = (f"{pct['other']:.1f} % of the total step time sampled is spent on 'All Others' "
                                     "time. This could be due to Python execution overhead.")
    return b


def _tpu_steps(step_db: StepDb) -> pd.DataFrame:
    """Per TPU step: TensorCore compute / input / output / idle (ms), input_pipeline.md §3."""
    rows = []
    for step in step_db.step_numbers:
        cores = step_db.steps[(step_db.steps["step_num"] == step) & (step_db.steps["core"] < 1_000_000)]
        durations, infeed, outfeed, idle, compute, infeed_pct = [], [], [], [], [], []
        for core, dur in zip(cores["core"], cores["duration_ps"]):
            cats = dict(step_db.category_ps.get((step, int(core)), {}))
            cats.pop("IDLE", None)
            busy = sum(cats.values())
            inf, outf = cats.get("infeed", 0), cats.get("outfeed", 0)
            tc_idle = dur - busy
            host = inf + outf + cats.get("host send", 0) + cats.get("host send-done", 0) + \
                cats.get("host recv", 0) + cats.get("host recv-done", 0) + tc_idle
            durations.append(dur)
            infeed.append(inf)
            outfeed.append(outf)
            compute.append(dur - host)
            idle.append(tc_idle)
            infeed_pct.append(100.0 * safe_divide(inf, dur))
        if not durations:
            continue
        tc_compute = min(compute) / 1e9
        tc_infeed = max(infeed) / 1e9
        tc_outfeed = float(np.mean(outfeed)) / 1e9
        tc_idle = max(0.0, min(durations) / 1e9 - (tc_compute + tc_infeed + tc_outfeed))
        rows.append({"step_num": step, "step_name": str(step), "tc_compute": tc_compute, "tc_infeed": tc_infeed,
                     "tc_outfeed": tc_outfeed, "tc_idle": tc_idle,
                     "step_time_ms": tc_compute + tc_infeed + tc_outfeed + tc_idle,
                     "infeed_percent": max(infeed_pct)})
    return pd.DataFrame(rows, columns=["step_num", "step_name", "tc_compute", "tc_infeed", "tc_outfeed", "tc_idle",
                                       "step_time_ms", "infeed_percent"])


def tpu_bottleneck(steps: pd.DataFrame) -> Bottleneck:
    total = float(steps["step_time_ms"].sum()) if len(steps) else 0.0
    if total == 0:
        return Bottleneck(input_statement=NO_STEP_STATEMENT)
    infeed = 100.0 * float(steps["tc_infeed"].sum()) / total
    outfeed = 100.0 * float(steps["tc_outfeed"].sum()) / total
    idle = 100.0 * float(steps["tc_idle"].sum()) / total
    cls, statement, word = classify_input(infeed, 0.0)
    return Bottleneck(cls, statement, word, infeed, outfeed, idle, max(0.0, 100.0 - infeed - outfeed - idle))


def analyze_steps(step_db: StepDb, hardware_type: str, host_db=None) -> StepAnalysis:
    """The input-pipeline analysis of a (combined) step database (`host_db`:
    the host op database, for the tf.data part of the kernel-launch statement)."""
    step_time = StepSummary.of(_step_times_ms(step_db))
    if hardware_type == "TPU":
        steps = _tpu_steps(step_db)
        breakdown = input_time_breakdown(host_db, 0.0, 0.0, False) if host_db is not None else None
        return StepAnalysis(hardware_type, steps, step_time,
                            {k: StepSummary.of(steps[k]) for k in ("tc_compute", "tc_infeed", "tc_outfeed",
                                                                     "tc_idle")},
                            StepSummary.of(steps["infeed_percent"]), tpu_bottleneck(steps), tpu=True,
                            input_breakdown=breakdown)
    steps = generic_step_frame(step_db)
    categories = {k: StepSummary.of(steps[k]) for k in CATEGORY_KEYS}
    breakdown = None
    if host_db is not None:
        h2d = StepSummary.of(_host_to_device_ms(step_db)).average
        breakdown = input_time_breakdown(host_db, h2d, step_time.average, True)
    input_pct = 100.0 * np.where(steps["step_time_ms"] > 1e-10, steps["input"] / steps["step_time_ms"].where(
        steps["step_time_ms"] > 1e-10, 1.0), 0.0) if len(steps) else np.zeros(0)
    return StepAnalysis(hardware_type, steps, step_time, categories, StepSummary.of(input_pct),
                        generic_bottleneck(steps, breakdown is not None and breakdown.uses_tf_data),
                        input_breakdown=breakdown)


# --- host-side input operations (input_pipeline.md §2.3) ---------------------------------------

_FILE_READ_SUFFIXES = ("::TFRecord", "::TextLine", "::FixedLengthRecord", "::SSTable", "::RecordIO", "::ArrayRecord")
_ADVANCED_READ_MARKERS = ("::MemoryReader", "::MemoryWriter", "::Interleave", "::Prefetch", "::ParallelMap")


def input_op_category(name: str, category: str) -> str | None:
    """The input category of a host op (None when it is not an input op)."""
    lowered = category.lower()
    if lowered in ("enqueue", "read", "preprocessing", "unknown"):
        return {"enqueue": "Enqueue", "read": "Demanded file read", "preprocessing": "Preprocessing",
                "unknown": "Unknown"}[lowered]
    if category.startswith("InfeedEnqueue") or category == "MemcpyHToD":
        return "Enqueue"
    if category == "Dataset":
        if name.endswith(_FILE_READ_SUFFIXES):
            return "Advanced file read" if any(m in name for m in _ADVANCED_READ_MARKERS) else "Demanded file read"
        return "Preprocessing"
    return None


@dataclass
class InputTimeBreakdown:
    enqueue_us: float = 0.0
    demanded_file_read_us: float = 0.0
    advanced_file_read_us: float = 0.0
    preprocessing_us: float = 0.0
    unclassified_non_enqueue_us: float = 0.0

    @property
    def uses_tf_data(self) -> bool:
        return self.demanded_file_read_us > 0 or self.advanced_file_read_us > 0 or self.preprocessing_us > 0


def input_ops(host_db) -> pd.DataFrame:
    """Host input ops (self time desc, name asc) with their input category."""
    m = host_db.sorted()
    cats = [input_op_category(str(n), str(c)) for n, c in zip(m["name"], m["category"])]
    return m.assign(input_category=cats)[[c is not None for c in cats]]


def input_time_breakdown(host_db, host_to_device_ms_avg: float, step_time_ms_avg: float,
                         generic: bool) -> InputTimeBreakdown:
    ops = input_ops(host_db)
    if ops.empty:
        return InputTimeBreakdown()
    per_cat = ops.groupby("input_category")["self_time_ps"].sum() / 1e6
    enqueue = float(per_cat.get("Enqueue", 0.0))
    demanded = float(per_cat.get("Demanded file read", 0.0))
    advanced = float(per_cat.get("Advanced file read", 0.0))
    preprocessing = float(per_cat.get("Preprocessing", 0.0))
    total_input = demanded + advanced + preprocessing
    if host_db.host_infeed_enq_start_diff_ps > 0:
        ratio = safe_divide(host_db.host_infeed_enq_duration_ps, host_db.host_infeed_enq_start_diff_ps)
    elif step_time_ms_avg > 0 and generic:
        ratio = safe_divide(host_to_device_ms_avg, step_time_ms_avg)
    else:
        ratio = 0.0
    ratio = min(1.0, ratio)
    non_enqueue = enqueue * (1 - ratio) / ratio if ratio != 0 else total_input
    out = InputTimeBreakdown(enqueue_us=enqueue)
    out.demanded_file_read_us = safe_divide(non_enqueue * demanded, total_input)
    out.advanced_file_read_us = safe_divide(non_enqueue * advanced, total_input)
    out.preprocessing_us = safe_divide(non_enqueue * preprocessing, total_input)
    out.unclassified_non_enqueue_us = max(0.0, non_enqueue - out.demanded_file_read_us - out.advanced_file_read_us
                                          - out.preprocessing_us)
    return out


def summary_next_step(classification: str, breakdown: InputTimeBreakdown) -> str:
    if classification in ("host", "both"):
        if not breakdown.uses_tf_data:
            return ("Consider using the tf.data API to enable profiler's host-side analysis for input pipeline. "
                    "Profiler currently does not support custom input pipeline (please ignore Section 3 below).")
        return "Look at Section 3 for the breakdown of input time on the host."
    return "You may skip the rest of this page."
