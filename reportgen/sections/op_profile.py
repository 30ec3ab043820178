"""Op profile page: XProf's op profile tree (docs/xprof/op_profile.md), browsable.

The device ops of the run (all hosts combined, and on a run of several
device hosts each host alone, as XProf offers it) grouped by program or by
category, with idle time or without: four trees per view, each node with
its share of the time, its wasted time, its share of the HBM traffic, its
framework op type, FLOPS utilization and memory-bandwidth utilization
(`reportgen/core/tools/op_profile.py`). The page script
(`static/op_profile.js`) draws the tree from JSON, orders it by time or by
wasted time and shows an op's details when it is selected. Runs without a
GPU or TPU get no page.
"""

from __future__ import annotations

import orjson
import pandas as pd

from reportgen.core.ops.device_db import xla_gpu_costs_missing
from reportgen.core.ops.device_run import DevicePart, device_part
from reportgen.core.ops.op_metrics import safe_divide
from reportgen.core.pages import OP_PROFILE_CSV, safe_file_part
from reportgen.core.tools.op_profile import (
    Node,
    OpProfileData,
    framework_op_type,
    hbm_fraction,
    headline_numbers,
    op_profile_data,
    op_profile_summary,
    walk,
    wasted_time_fraction,
)
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.summary_blocks import OpProfileBlock

CSV_PATH = OP_PROFILE_CSV
HOST_CSV_PATH = "data/op_profile/op_profile__{host}.csv"
PATH_SEPARATOR = " > "
CSV_COLUMNS = ["Path", "Name", "Category", "Time (%)", "Wasted time (%)", "HBM (%)", "Framework op type",
               "FLOPS utilization (%)", "Memory bandwidth utilization (%)",
               "On-chip read bandwidth utilization (%)", "On-chip write bandwidth utilization (%)", "Occurrences",
               "Total time (us)", "Avg. time (us)", "Program id", "Framework op", "HLO expression"]
SHOW_CHOICES = [10, 25, 50, 100]
# The hosts' own trees travel in the page (each host's four trees: ≈ 6 KB on the shared TPU capture);
# a run of many hosts with large trees keeps the page within this, the rest in their CSVs.
MAX_HOST_TREES_BYTES = 8 * 2**20


class _Symbols:
    """Op details shared by the four trees, each stored once; nodes refer to them by index."""

    def __init__(self, program_names: dict[int, str]):
        self.items: list[dict] = []
        self._index: dict[tuple, int] = {}
        self._programs = program_names

    def add(self, node: Node) -> int | None:
        s = node.symbol
        if s is None:
            return None
        hlo = s.hlo
        program = ""
        if not node.is_fused and s.category != "IDLE":
            name = self._programs.get(s.program_id)
            program = f"{name}({s.program_id})" if name else str(s.program_id)
        item = {
            "name": node.name, "category": s.category, "expression": s.expression, "provenance": s.provenance,
            "op_type": framework_op_type(s.provenance),
            "program": program, "source": f"{s.source_file}:{s.source_line}" if s.source_file else "",
            "stack": s.source_stack, "fused": node.is_fused, "kernel_metadata": s.kernel_metadata,
            "shape": hlo.shape if hlo else "", "window": hlo.window if hlo else "",
            "deduplicated_name": hlo.deduplicated_name if hlo else "",
            "layout": [{"dim": d.dimension, "size": d.size, "alignment": d.alignment, "padded": d.padded,
                        "semantics": d.semantics} for d in (hlo.layout if hlo else [])],
        }
        key = tuple((k, str(v)) for k, v in item.items())
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(item)
        return self._index[key]


def _page_node(node: Node, root: Node, symbols: _Symbols) -> dict:
    m = node.metrics
    total_time = root.metrics.raw_time if root.metrics else 0.0
    out = {
        "n": node.name,
        "t": m.raw_time if m else 0.0,
        "p": 100.0 * safe_divide(m.raw_time, total_time) if m else 0.0,
        "f": m.uncapped_flops_utilization if m else 0.0,
        "b": list(m.bandwidth_utils) if m else [0.0, 0.0, 0.0],
        "o": m.occurrences if m else 0,
        "a": m.avg_time_ps if m else 0.0,
        "k": node.num_children,
        "ch": [_page_node(c, root, symbols) for c in node.children],
    }
    wasted, hbm = wasted_time_fraction(node, root), hbm_fraction(node, root)
    if wasted is not None:
        out["w"] = wasted
    if hbm is not None:
        out["h"] = hbm
    index = symbols.add(node)
    if index is not None:
        out["x"] = index
    if node.symbol is not None:
        out["c"] = node.symbol.category
    return out


def _page_trees(trees: dict[tuple[str, bool], Node], symbols: _Symbols) -> dict:
    return {f"{group}{'-noidle' if exclude else ''}": _page_node(root, root, symbols)
            for (group, exclude), root in trees.items()}


def page_payload(data: OpProfileData) -> dict:
    """The page's data: the combined trees and, within MAX_HOST_TREES_BYTES, each host's (`hosts_left_out`
    names the hosts whose trees would pass it: their CSVs still hold them)."""
    symbols = _Symbols(data.run.details.program_names)
    trees = _page_trees(data.trees, symbols)
    hosts, left_out, used = {}, [], 0
    for host, trees_of_host in data.per_host.items():
        page_trees = _page_trees(trees_of_host, symbols)
        size = len(orjson.dumps(page_trees))
        if used + size > MAX_HOST_TREES_BYTES:
            left_out.append(host)
            continue
        hosts[host] = page_trees
        used += size
    return {"trees": trees, "hosts": hosts, "hosts_left_out": left_out, "symbols": symbols.items,
            "show": SHOW_CHOICES}


def _percent(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def csv_frame(root: Node, program_names: dict[int, str]) -> pd.DataFrame:
    rows = []
    total = root.metrics.raw_time if root.metrics else 0.0
    for path, node in walk(root):
        m = node.metrics
        if m is None:
            continue
        s = node.symbol
        rows.append({
            "Path": PATH_SEPARATOR.join((*path, node.name)), "Name": node.name,
            "Category": s.category if s else "", "Time (%)": 100.0 * safe_divide(m.raw_time, total),
            "Wasted time (%)": _percent(wasted_time_fraction(node, root)),
            "HBM (%)": _percent(hbm_fraction(node, root)),
            "Framework op type": framework_op_type(s.provenance if s else ""),
            "FLOPS utilization (%)": 100.0 * m.uncapped_flops_utilization,
            "Memory bandwidth utilization (%)": 100.0 * m.bandwidth_utils[0],
            "On-chip read bandwidth utilization (%)": 100.0 * m.bandwidth_utils[1],
            "On-chip write bandwidth utilization (%)": 100.0 * m.bandwidth_utils[2],
            "Occurrences": m.occurrences, "Total time (us)": m.raw_time / 1e6, "Avg. time (us)": m.avg_time_ps / 1e6,
            "Program id": str(s.program_id) if s and not node.is_fused and s.category != "IDLE" else "",
            "Framework op": s.provenance if s else "", "HLO expression": s.expression if s else "",
        })
    return pd.DataFrame(rows, columns=CSV_COLUMNS)


class OpProfileSection(Section):
    slug = "op_profile"
    title = "Op profile"

    def host_part(self, host: HostContext) -> DevicePart | None:
        return device_part(host)

    def combine(self, run: RunContext, parts: dict[str, DevicePart]) -> OpProfileData | None:
        return op_profile_data(run.host_names, parts)

    def summary(self, data: OpProfileData) -> OpProfileBlock:
        return op_profile_summary(data)

    def render(self, data: OpProfileData, page) -> None:
        page.write_csv(CSV_PATH, csv_frame(data.trees[("program", False)], data.run.details.program_names))
        host_csvs: dict[str, str] = {}
        for host, trees in data.per_host.items():
            # Distinct hosts give distinct names (`a b`, `a:b` and `a_b` included).
            path = HOST_CSV_PATH.format(host=safe_file_part(host, len("op_profile__.csv")))
            host_csvs[host] = page.write_csv(path, csv_frame(trees[("program", False)], data.run.details.program_names))
        env = data.run.op_stats.environment
        perf = data.run.op_stats.perf_env
        bws = list(perf.peak_bws_giga_bytes_per_second) + [0.0, 0.0, 0.0]
        page.write_html(
            "op_profile.html",
            "op_profile.html",
            payload=page_payload(data),
            numbers=headline_numbers(data),
            device_type=env.device_type,
            hardware_type=env.hardware_type,
            hosts=data.run.hosts,
            peak_tflops=perf.peak_tera_flops_per_second,
            peak_bws=bws[:3],
            has_ops=data.run.has_ops,
            dvfs=data.run.time_scale_multiplier,
            csv_path=CSV_PATH,
            host_csvs=host_csvs,
            xla_gpu_costs_missing=xla_gpu_costs_missing(data.run.op_stats.device_db, env.hardware_type),
        )
