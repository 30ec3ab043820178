"""The core result of one host, and of a run: XProf's OpStats.

`HostOpStats` is computed once per host file (`compute_host_op_stats`) where
the capture is decoded; it is small and picklable, and every tool section
reads it (through `HostContext.op_stats`). `combine_op_stats` merges hosts
into a `RunOpStats` the way XProf combines OpStats (docs/xprof/op_stats.md
§9): op databases added up, steps aligned across hosts and intersected,
run environments merged.

    op = compute_host_op_stats(capture)          # per host
    run = combine_op_stats([op_a, op_b])         # per run (host order = host ids)

Fields read by the tools:

* `host_db`, `device_db`: `OpMetricsDb` (host ops with per-thread IDLE;
  device ops with per-device IDLE, precision and TPU duty-cycle totals);
* `step_db`: `StepDb`, every step XProf keeps (see `drop_incomplete_steps`);
* `environment`: `RunEnvironment` (device type and count, hosts, training);
  `perf_env`: peak FLOP rate and bandwidths;
* `kernel_reports`: the GPU kernel stats DB (`kernel_stats.kernel_reports`;
  the run's is the hosts' reports concatenated, re-sorted and cut);
* `diagnostics`: capture errors and warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from reportgen.capture import HostCapture
from reportgen.core.events import schema
from reportgen.core.events.grouping import Grouping, group_events
from reportgen.core.events.table import EventTable
from reportgen.core.frames import concat_rows
from reportgen.core.hlo.model import HloModule
from reportgen.core.ops.device_db import core_details, device_op_metrics_db
from reportgen.core.ops.host_db import host_op_metrics_db
from reportgen.core.ops.kernel_reports import combine_host_reports, empty_reports, kernel_reports
from reportgen.core.ops.op_metrics import OpMetricsDb, combine_dbs
from reportgen.core.ops.perf_env import PerfEnv, perf_env, plane_stats
from reportgen.core.ops.training import modules_show_training
from reportgen.core.steps.events import device_step_events
from reportgen.core.steps.step_db import StepDb, generic_step_db
from reportgen.core.steps.tpu_steps import tpu_step_db

HARDWARE_RANK = {"UNKNOWN_HARDWARE": 0, "CPU_ONLY": 1, "GPU": 2, "TPU": 3}
MAX_DEVICES_PER_HOST = 1000  # XProf's global core id = host id × 1000 + local core id


@dataclass
class RunEnvironment:
    hostnames: list[str]
    host_count: int
    task_count: int
    device_type: str
    device_core_count: int
    hardware_type: str  # CPU_ONLY, GPU, TPU (or UNKNOWN_HARDWARE)
    is_training: bool = False

    @property
    def has_device(self) -> bool:
        return self.hardware_type in ("GPU", "TPU")


_NVIDIA_MODELS = {2: "Fermi", 3: "Kepler", 5: "Maxwell", 6: "Pascal", 9: "Hopper", 10: "Blackwell"}


def nvidia_model_name(major: int, minor: int) -> str:
    """XProf's GpuModelName for an Nvidia compute capability."""
    if major == 7:
        return "Nvidia GPU (Volta)" if minor < 5 else "Nvidia GPU (Turing)"
    if major == 8:
        return "Nvidia GPU (Ampere)" if minor < 9 else "Nvidia GPU (Ada Lovelace)"
    name = _NVIDIA_MODELS.get(major)
    return f"Nvidia GPU ({name})" if name else "Nvidia GPU"


def host_environment(capture: HostCapture, is_training: bool = False) -> RunEnvironment:
    """The run environment of one host (op_stats.md §3.1): GPU planes first,
    then TPU TensorCore planes, else a CPU-only capture."""
    hostname = capture.hostnames[0] if capture.hostnames else "localhost"
    names = list(capture.planes["name"])

    def environment(device_type: str, cores: int, hardware: str) -> RunEnvironment:
        return RunEnvironment([hostname], 1, 1, device_type, cores, hardware, is_training)

    gpu = [i for i, name in enumerate(names) if name.startswith(schema.GPU_PLANE_PREFIX)]
    if gpu:
        stats = plane_stats(capture, gpu[0])
        model = ""
        if stats.get("device_vendor") == "Nvidia":
            major, minor = stats.get("compute_cap_major", 0), stats.get("compute_cap_minor", 0)
            model = nvidia_model_name(major if isinstance(major, int) else 0, minor if isinstance(minor, int) else 0)
        elif stats.get("device_vendor") == "AMD":
            model = str(stats.get("gpu_device_name", ""))
        return environment(model or "GPU", len(gpu), "GPU")
    tpu = [i for i, name in enumerate(names) if schema.TPU_CORE_RE.match(name)]
    if tpu:
        return environment(str(plane_stats(capture, tpu[0]).get("device_type_string", "")), len(tpu), "TPU")
    return environment("CPU", 0, "CPU_ONLY")


@dataclass
class Diagnostics:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class HostOpStats:
    """Per-host core result (picklable): see the module docstring."""

    host: str
    host_db: OpMetricsDb
    device_db: OpMetricsDb
    step_db: StepDb
    environment: RunEnvironment
    perf_env: PerfEnv
    diagnostics: Diagnostics
    core_details: dict[int, dict] = field(default_factory=dict)
    mxu_utilization_percent: float = 0.0
    hbm_utilization_percent: float = 0.0
    group_names: dict[int, str] = field(default_factory=dict)
    kernel_reports: pd.DataFrame = field(default_factory=empty_reports)


@dataclass
class RunOpStats(HostOpStats):
    """A run's combined OpStats; `hosts` lists the hosts in host-id order."""

    hosts: list[str] = field(default_factory=list)


def compute_host_op_stats(capture: HostCapture, modules: dict[int, HloModule], table: EventTable | None = None, *,
                          grouping: Grouping | None = None) -> HostOpStats:
    """The host's OpStats. `modules` are the capture's HLO modules (`loaders.hlo.hlo_modules`);
    `table` and `grouping` its event table and grouping, when the caller already has them
    (`HostContext` shares them between sections)."""
    table = table if table is not None else EventTable(capture)
    grouping = grouping if grouping is not None else group_events(table)
    host_db = host_op_metrics_db(table, grouping.is_eager)
    device_db, device_planes, is_tpu = device_op_metrics_db(table, grouping, modules)
    if is_tpu:
        step_db = tpu_step_db(table, grouping, device_planes)
    else:
        events, has_device = device_step_events(table, grouping)
        step_db, c16, c32 = generic_step_db(events, has_device)
        device_db.compute_16bit_ps, device_db.compute_32bit_ps = c16, c32
    environment = host_environment(capture, is_training=modules_show_training(modules))
    details = {}
    if is_tpu:
        for plane in device_planes:
            d = core_details(table, plane)
            if d is not None:
                details[int(capture.planes["id"].iloc[plane])] = {**d, "hostname": environment.hostnames[0]}
    counters = {}
    if table.host_plane is not None:
        counters = plane_stats(capture, table.host_plane)
    # Read by a run's combine for every host, which runs on one core: computed here, in the host's worker.
    _ = step_db.spans
    return HostOpStats(
        host=capture.host,
        host_db=host_db,
        device_db=device_db,
        step_db=step_db,
        environment=environment,
        perf_env=perf_env(capture, device_planes),
        diagnostics=Diagnostics(errors=sorted(set(capture.errors)), warnings=sorted(set(capture.warnings))),
        core_details=details,
        mxu_utilization_percent=float(counters.get("matrix_unit_utilization_percent", 0.0) or 0.0),
        hbm_utilization_percent=float(counters.get("hbm_utilization_percent", 0.0) or 0.0),
        group_names=grouping.group_names,
        kernel_reports=kernel_reports(table, modules),
    )


# --- combining hosts -------------------------------------------------------------------------

def _similarity(sub: tuple, chief: tuple, s0: int, c0: int, n: int) -> float:
    sb, se = sub[0][s0:s0 + n], sub[1][s0:s0 + n]
    cb, ce = chief[0][c0:c0 + n], chief[1][c0:c0 + n]
    overlap = np.minimum(se, ce) - np.maximum(sb, cb)
    return float(np.where(overlap > 0, overlap, 0).sum())


def _align(sub: tuple, chief: tuple) -> tuple[int, int, int]:
    """XProf's FindStepsAlignment: (begin subordinate idx, begin chief idx, steps)."""
    ns, nc = len(sub[0]), len(chief[0])
    if ns == 0 or nc == 0:
        return 0, 0, 0
    best, alignment = -1.0, (0, 0, 0)
    anchors = [(0, c) for c in range(nc)] + [(s, 0) for s in range(1, ns)]
    for s_anchor, c_anchor in anchors:
        pre = min(s_anchor, c_anchor)
        n = pre + min(ns - s_anchor, nc - c_anchor)
        sim = _similarity(sub, chief, s_anchor - pre, c_anchor - pre, n)
        if sim > best:
            best, alignment = sim, (s_anchor - pre, c_anchor - pre, n)
    return alignment


@dataclass
class StepIntersection:
    first_index: dict[int, int]
    num_steps: int
    empty_intersect: bool


def step_intersection(step_dbs: dict[int, StepDb]) -> StepIntersection:
    spans = {h: db.spans for h, db in step_dbs.items()}
    chief, shortest = None, None
    for h, (b, e) in spans.items():
        lo, hi = (b.min(), e.max()) if len(b) else (0, 0)
        dur = int(hi - lo) if lo < hi else 0
        if shortest is None or dur < shortest:
            chief, shortest = h, dur
    if chief is None:
        return StepIntersection({}, 0, False)
    align = {h: ((0, 0, len(spans[h][0])) if h == chief else _align(spans[h], spans[chief])) for h in spans}
    begin = max(a[1] for a in align.values())
    end = min(a[1] + a[2] for a in align.values())
    if begin > end:
        return StepIntersection({}, 0, True)
    first = {h: a[0] + begin - a[1] for h, a in align.items()}
    return StepIntersection(first, end - begin, False)


def _combine_environment(envs: list[RunEnvironment]) -> RunEnvironment:
    hostnames: dict[str, None] = {}  # in first-seen order (a list's `in` made this quadratic in hosts)
    device_type, cores, task_count, hardware = "", 0, 0, "UNKNOWN_HARDWARE"
    training = False
    for env in envs:
        hostnames.update(dict.fromkeys(env.hostnames))
        if env.device_type not in ("CPU", "Device"):
            device_type = env.device_type
            cores += env.device_core_count
        elif not device_type:
            device_type = env.device_type
        if HARDWARE_RANK.get(env.hardware_type, 0) > HARDWARE_RANK.get(hardware, 0):
            hardware = env.hardware_type
        task_count += env.task_count
        training = env.is_training
    return RunEnvironment(list(hostnames), len(hostnames), task_count, device_type, cores, hardware, training)


def drop_incomplete_steps(op_stats: HostOpStats) -> HostOpStats:
    """XProf 2.24.2's overview and input-pipeline view of a host: first and last
    step dropped when there are more than five."""
    return replace(op_stats, step_db=op_stats.step_db.drop_first_and_last())


def _combine_steps(parts: list[HostOpStats], no_accelerator: bool) -> StepDb:
    workers = {i: p.step_db for i, p in enumerate(parts)
               if p.environment.has_device or no_accelerator}
    inter = step_intersection(workers)
    kind = next((db.kind for db in workers.values() if len(db)), "generic")
    # Each host's chosen steps renumbered from 0, its cores made global, all hosts in one concat and one
    # filter: per-host pandas filtering cost milliseconds a host, four times a build.
    frames, renumbered, core_base, category_ps = [], [], [], {}
    for host_id, db in workers.items():
        first = inter.first_index.get(host_id, 0)  # the host's chosen steps: first … first + num_steps - 1
        new_number = db.step_of_row - first
        frames.append(db.steps)
        renumbered.append(np.where((new_number >= 0) & (new_number < inter.num_steps), new_number, -1))
        core_base.append(np.full(len(db.steps), host_id * MAX_DEVICES_PER_HOST, np.int64))
        if db.category_ps:
            renumber = {old: new for new, old in enumerate(db.step_numbers[first:first + inter.num_steps])}
            for (step, core), cats in db.category_ps.items():
                if step in renumber:
                    category_ps[(renumber[step], host_id * MAX_DEVICES_PER_HOST + core)] = cats
    if frames:
        new_numbers = np.concatenate(renumbered)
        keep = new_numbers >= 0
        steps = concat_rows(frames)[keep].reset_index(drop=True)
        steps["core"] = np.concatenate(core_base)[keep] + steps["core"]
        steps["step_num"] = new_numbers[keep]
    else:
        steps = StepDb().steps
    steps = steps.sort_values(["step_num", "core"], kind="stable", ignore_index=True)
    return StepDb(steps=steps, kind=kind, category_ps=category_ps,
                  use_incomplete_step=any(db.use_incomplete_step for db in workers.values()),
                  empty_intersect=inter.empty_intersect)


def combine_metric_dbs(parts: list[HostOpStats]) -> tuple[OpMetricsDb, OpMetricsDb]:
    """The hosts' host and device op metrics combined (what `combine_op_stats` takes, or computes)."""
    return (combine_dbs([p.host_db for p in parts], update_num_cores=False),
            combine_dbs([p.device_db for p in parts]))


def combine_op_stats(parts: list[HostOpStats], metric_dbs: tuple[OpMetricsDb, OpMetricsDb] | None = None,
                     ) -> RunOpStats:
    """Merge hosts (in host-id order). One host is taken as it is. `metric_dbs`: the hosts' op metrics
    already combined (`combine_metric_dbs`), which the step rules do not change."""
    if len(parts) == 1:
        p = parts[0]
        return RunOpStats(**{f: getattr(p, f) for f in HostOpStats.__dataclass_fields__}, hosts=[p.host])
    no_accelerator = not any(p.environment.has_device for p in parts)
    peak = PerfEnv()
    for p in parts:
        if p.perf_env.peak_tera_flops_per_second > 0:
            peak.peak_tera_flops_per_second = p.perf_env.peak_tera_flops_per_second
        if p.perf_env.peak_bws_giga_bytes_per_second and not peak.peak_bws_giga_bytes_per_second:
            peak.peak_bws_giga_bytes_per_second = list(p.perf_env.peak_bws_giga_bytes_per_second)
    details = {}
    for host_id, p in enumerate(parts):
        for core, d in p.core_details.items():
            details[host_id * MAX_DEVICES_PER_HOST + core] = d
    host_db, device_db = combine_metric_dbs(parts) if metric_dbs is None else metric_dbs
    return RunOpStats(
        host=",".join(p.host for p in parts),
        host_db=host_db,
        device_db=device_db,
        step_db=_combine_steps(parts, no_accelerator),
        environment=_combine_environment([p.environment for p in parts]),
        perf_env=peak,
        diagnostics=Diagnostics(errors=[e for p in parts for e in p.diagnostics.errors],
                                warnings=[w for p in parts for w in p.diagnostics.warnings]),
        core_details=details,
        mxu_utilization_percent=sum(p.mxu_utilization_percent for p in parts) / len(parts),
        hbm_utilization_percent=parts[-1].hbm_utilization_percent,
        kernel_reports=combine_host_reports({p.host: p.kernel_reports for p in parts}),
        hosts=[p.host for p in parts],
    )
