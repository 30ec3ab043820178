"""XProf's op profile: the device ops as a tree with time, FLOPS and bandwidth utilization per node.

Rules from docs/xprof/op_profile.md: every device op record (DB order) is
added to the tree grouped by program (`program` → category → deduplicated
name → op) or by category (category → deduplicated name → op); the IDLE
record is a leaf under the root unless idle time is excluded; ops with
nested children time (while, call, …) only count towards the root and their
program; a fusion's instructions hang under its op. Then every node's
metrics are finished (utilizations against the device's peaks), children
sorted and pruned to the top 100 below the grouping levels, and groups of
duplicates named "<op> and its duplicate(s)" (a group of one is replaced by
its op).

    tree = build_op_profile(records, details, perf_env, totals, group_by="program", exclude_idle=False)
    xprof_json(tree)        # XProf's JSON for the node (tests compare it with the oracle)

Ties in the sort keep DB order (XProf's partial sort leaves their order
unspecified).

XProf 2.24's op table adds, from each node's metrics and the root's, the
node's wasted time (`wasted_time_fraction`: time fraction × (1 − max(FLOPS
utilization, HBM bandwidth utilization))), its share of the HBM traffic
(`hbm_fraction`) and the framework op type of its provenance
(`framework_op_type`), and can order siblings by wasted time
(`by_wasted_time`). On a run of several hosts XProf shows one host's op
profile at a time: `OpProfileData.per_host` holds each host's trees beside
the combined ones.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pandas as pd

from reportgen.core.hlo.ops import HloOp
from reportgen.core.ops.device_run import DevicePart, DeviceRun, combine_device_parts
from reportgen.core.ops.op_metrics import IDLE, safe_divide
from reportgen.core.ops.perf_env import PerfEnv
from reportgen.summary_blocks import DeviceOp, OpCategory, OpProfileBlock

CHILDREN_LIMIT = 100  # XProf's op_profile_limit
U64 = 1 << 64
_GIB = float(1 << 30)
GROUPINGS = ("program", "category")
_SORT_LEVELS = {"program": 2, "category": 1}


def giga_to_gibi(value: float) -> float:
    return value * 1e9 / _GIB


def gibi_to_giga(value: float) -> float:
    return value * _GIB / 1e9


def is_fusion(category: str) -> bool:
    return category.endswith(" fusion")


@dataclass
class Accumulated:
    """Metrics summed into a node (XProf's OpMetrics of the node)."""

    occurrences: int = 0
    time_ps: float = 0.0
    self_time_ps: float = 0.0
    normalized_time_ps: float = 0.0
    flops: float = 0.0
    model_flops: float = 0.0
    bytes_accessed: float = 0.0
    hbm_read: float = 0.0
    hbm_write: float = 0.0
    onchip_read: float = 0.0
    onchip_write: float = 0.0

    def add_op(self, op: dict) -> None:
        """CombineOpMetrics: everything adds up."""
        self.occurrences += op["occurrences"]
        self.time_ps += op["time_ps"]
        self.self_time_ps += op["self_time_ps"]
        self.normalized_time_ps += op["normalized_time_ps"]
        self._add_work(op)

    def add_self(self, op: dict) -> None:
        """UpdateNodeMetrics (root, programs): self time as time; work only for ops without nested ops."""
        self.time_ps += op["self_time_ps"]
        self.normalized_time_ps += op["normalized_time_ps"]
        self.self_time_ps += op["self_time_ps"]
        if op["time_ps"] == op["self_time_ps"]:
            self._add_work(op)

    def _add_work(self, op: dict) -> None:
        self.flops += op["flops"]
        self.model_flops += op["model_flops"]
        self.bytes_accessed += op["bytes_accessed"]
        for col in ("hbm_read", "hbm_write", "onchip_read", "onchip_write"):
            setattr(self, col, getattr(self, col) + op[col])


@dataclass
class Symbol:
    """XProf's Node.XLAInstruction: what a node says about its HLO op."""

    expression: str = ""
    provenance: str = ""
    category: str = ""
    program_id: int = 0  # unsigned
    fingerprint: int = 0
    source_file: str = ""
    source_line: int = 0
    source_stack: str = ""
    kernel_metadata: str = ""
    hlo: HloOp | None = None  # the HLO instruction, for the page's op details (not in XProf's JSON)


@dataclass
class Metrics:
    """A node's finished metrics (XProf's op_profile.Metrics)."""

    flops: float = 0.0  # FLOPS utilization × time fraction
    uncapped_flops: float = 0.0
    bandwidth_utils: tuple[float, float, float] = (0.0, 0.0, 0.0)  # HBM, on-chip read, on-chip write
    raw_time: float = 0.0
    raw_flops: float = 0.0
    bf16_flops: float = 0.0
    normalized_time_ps: float = 0.0
    raw_bytes_accessed: tuple[float, float, float] = (0.0, 0.0, 0.0)
    occurrences: int = 0
    avg_time_ps: float = 0.0
    time_fraction: float = 0.0  # raw_time / the tree's total time (XProf's UI divides by it)

    @property
    def flops_utilization(self) -> float:
        """FLOPS utilization of the node itself, capped at 1."""
        return safe_divide(self.flops, self.time_fraction)

    @property
    def uncapped_flops_utilization(self) -> float:
        """FLOPS utilization of the node itself as XProf 2.24's op table shows it (not capped)."""
        return safe_divide(self.uncapped_flops, self.time_fraction)


@dataclass
class Node:
    name: str = ""
    children: list[Node] = field(default_factory=list)
    symbol: Symbol | None = None
    acc: Accumulated | None = None
    metrics: Metrics | None = None
    num_children: int = 0
    is_fused: bool = False  # an instruction inside a fusion (no time of its own)


@dataclass
class ProfileTotals:
    total_time_ps: float
    total_op_time_ps: float


def _new_child(parent: Node, name: str) -> Node:
    node = Node(name=name, acc=Accumulated())
    parent.children.append(node)
    return node


def _symbol_of(op: dict, hlo: HloOp | None) -> Symbol:
    expression = op["long_name"]
    if not expression and hlo is not None:
        expression = hlo.expression
    return Symbol(expression=expression, provenance=op["provenance"], category=op["category"],
                  program_id=int(op["hlo_module_id"]) % U64, source_file=op["source_file"],
                  source_line=int(op["source_line"]), source_stack=op["source_stack"],
                  kernel_metadata=_kernel_metadata(expression), hlo=hlo)


_KERNEL_METADATA = re.compile(r'kernel_metadata="((?:[^"\\]|\\.)*)"')


def _kernel_metadata(expression: str) -> str:
    """XProf's ExtractXprofKernelMetadata: the `xprof_metadata` value of the `kernel_metadata`
    frontend attribute (a quoted JSON object), or ""."""
    if "xprof_metadata" not in expression:
        return ""
    match = _KERNEL_METADATA.search(expression)
    if not match:
        return ""
    try:
        value = json.loads(json.loads(f'"{match.group(1)}"')).get("xprof_metadata", "")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _fused_nodes(parent: Node, hlo: HloOp) -> None:
    for child in hlo.fused:
        node = _new_child(parent, child.name)
        node.is_fused = True
        node.symbol = Symbol(expression=child.expression, provenance=child.provenance, category=child.category,
                             hlo=child)
        # A fused instruction is one occurrence without time; flops would come from XLA's cost model.
        node.acc.occurrences = 1
        _fused_nodes(node, child)


def _add_op(root: Node, op: dict, group_by: str, programs: dict, categories: dict, dedups: dict,
            program_names: dict[int, str], hlo: HloOp | None) -> None:
    root.acc.add_self(op)
    idle = op["category"] == IDLE
    program = None
    if group_by == "program" and not idle:
        pid = int(op["hlo_module_id"]) % U64
        program = programs.get(pid)
        if program is None:
            name = f"{program_names[pid]}({pid})" if pid in program_names else "main"
            program = programs[pid] = _new_child(root, name)
        program.acc.add_self(op)
    if op["time_ps"] - op["self_time_ps"] > 0:
        return  # ops with nested ops only count in the root and program totals
    if idle:
        leaf = _new_child(root, op["name"])
        leaf.symbol = Symbol(category=IDLE)
        leaf.acc.add_op(op)
        return
    parent = program if program is not None else root
    category = categories.get((id(parent), op["category"]))
    if category is None:
        category = categories[(id(parent), op["category"])] = _new_child(parent, op["category"])
    dedup_name = op["deduplicated_name"] or op["name"]
    dedup = dedups.get((id(category), dedup_name))
    if dedup is None:
        dedup = dedups[(id(category), dedup_name)] = _new_child(category, dedup_name)
    leaf = _new_child(dedup, op["name"])
    leaf.symbol = _symbol_of(op, hlo)
    if hlo is not None:
        _fused_nodes(leaf, hlo)
    for node in (category, dedup, leaf):
        node.acc.add_op(op)


def _finish(node: Node, total_time_ps: float, peak_gflops: float, peak_bw: list[float]) -> None:
    for child in node.children:
        _finish(child, total_time_ps, peak_gflops, peak_bw)
    m = node.acc
    if m is None:
        return
    t_ns = m.time_ps / 1000.0
    rate = safe_divide(m.flops, t_ns)
    if m.normalized_time_ps != 0:
        rate *= safe_divide(m.time_ps, m.normalized_time_ps)
    uncapped = safe_divide(rate, peak_gflops)
    fraction = safe_divide(m.time_ps, total_time_ps)
    hbm = giga_to_gibi(safe_divide(m.hbm_read, t_ns)) + giga_to_gibi(safe_divide(m.hbm_write, t_ns))
    sram_read = giga_to_gibi(safe_divide(m.onchip_read, t_ns))
    sram_write = giga_to_gibi(safe_divide(m.onchip_write, t_ns))
    node.metrics = Metrics(
        flops=min(uncapped, 1.0) * fraction,
        uncapped_flops=uncapped * fraction,
        bandwidth_utils=tuple(min(1.0, safe_divide(v, peak_bw[i])) for i, v in
                              enumerate((hbm, sram_read, sram_write))),
        raw_time=m.time_ps,
        raw_flops=m.model_flops,
        bf16_flops=m.flops,
        normalized_time_ps=m.normalized_time_ps,
        raw_bytes_accessed=tuple(gibi_to_giga(v) * t_ns for v in (hbm, sram_read, sram_write)),
        occurrences=m.occurrences,
        avg_time_ps=safe_divide(m.time_ps, m.occurrences),
        time_fraction=fraction,
    )


def _sort_and_prune(node: Node, level: int, limit: int) -> None:
    node.num_children = len(node.children)
    for child in node.children:
        _sort_and_prune(child, level - 1, limit)
    keep = len(node.children) if level > 0 else limit
    if len(node.children) > 1:
        by_flops = node.symbol is not None and is_fusion(node.symbol.category)
        order = sorted(range(len(node.children)), key=lambda i: (
            -(node.children[i].metrics.raw_flops if by_flops else node.children[i].metrics.raw_time), i))
        node.children = [node.children[i] for i in order[:keep]]


def _finish_duplicates(node: Node) -> None:
    children = node.children
    if children and node.symbol is None and all(c.symbol is not None for c in children):
        first = children[0]
        if len(children) == 1:
            node.name, node.metrics, node.symbol = first.name, first.metrics, first.symbol
            node.children, node.num_children, node.is_fused = first.children, first.num_children, first.is_fused
            return
        node.name = f"{first.name} and its duplicate(s)"
        s = first.symbol
        fusion = is_fusion(s.category)
        node.symbol = Symbol(expression=s.expression, provenance="" if fusion else s.provenance,
                             category=s.category, program_id=s.program_id, fingerprint=s.fingerprint,
                             source_file=s.source_file, source_line=s.source_line, source_stack=s.source_stack,
                             kernel_metadata=s.kernel_metadata, hlo=s.hlo)
        return
    for child in children:
        _finish_duplicates(child)


def build_op_profile(records: pd.DataFrame, hlo: dict, program_names: dict[int, str], perf_env: PerfEnv,
                     totals: ProfileTotals, group_by: str = "program", exclude_idle: bool = False,
                     limit: int = CHILDREN_LIMIT) -> Node:
    """One op profile tree (`records`: `core.ops.device_records.hlo_op_records()` of the device DB)."""
    if group_by not in GROUPINGS:
        group_by = "program"
    if records.empty:
        return Node()
    root = Node(name=f"by_{group_by}", acc=Accumulated())
    programs: dict = {}
    categories: dict = {}
    dedups: dict = {}
    for op in records.to_dict("records"):
        if op["name"].startswith("region"):
            continue
        if exclude_idle and op["category"] == IDLE:
            continue
        key = (int(op["hlo_module_id"]), op["name"])
        _add_op(root, op, group_by, programs, categories, dedups, program_names, hlo.get(key))
    total = totals.total_op_time_ps if exclude_idle else totals.total_time_ps
    root.acc.time_ps = total
    bws = list(perf_env.peak_bws_giga_bytes_per_second) + [0.0, 0.0, 0.0]
    _finish(root, total, perf_env.peak_tera_flops_per_second * 1000.0, [giga_to_gibi(b) for b in bws[:3]])
    level = _SORT_LEVELS[group_by]
    for _ in range(2):  # XProf runs the pass twice, so num_children ends up counting kept children
        _sort_and_prune(root, level, limit)
    _finish_duplicates(root)
    return root


# --- what XProf's op table shows beside the tree's metrics -------------------------------------------
#
# XProf 2.24's op table computes these in the browser from the tree's metrics (op_table_entry,
# common/utils): the node's share of the root's time, its "wasted time", its share of the root's HBM
# traffic and its framework op type. None stands for the "-" (or blank) XProf shows where the metrics
# are missing or a utilization is 0.


def time_fraction(node: Node, root: Node) -> float:
    """The node's raw time over the root's (0 where either has none)."""
    if node.metrics is None or root.metrics is None or not node.metrics.raw_time or not root.metrics.raw_time:
        return 0.0
    return node.metrics.raw_time / root.metrics.raw_time


def wasted_time_fraction(node: Node, root: Node) -> float | None:
    """XProf's wasted time: time fraction × (1 − max(FLOPS utilization, HBM bandwidth utilization)), the
    FLOPS utilization uncapped. None (XProf: "-") where the node has no time or no HBM utilization: the
    browser's max() of a missing value is NaN."""
    if node.metrics is None:
        return None
    fraction = time_fraction(node, root)
    hbm = node.metrics.bandwidth_utils[0]
    if not fraction or not hbm:
        return None
    return fraction * (1.0 - max(node.metrics.uncapped_flops / fraction, hbm))


def hbm_fraction(node: Node, root: Node) -> float | None:
    """The node's HBM bytes over the root's; None where the root has none."""
    if node.metrics is None or root.metrics is None or not root.metrics.raw_bytes_accessed[0]:
        return None
    return node.metrics.raw_bytes_accessed[0] / root.metrics.raw_bytes_accessed[0]


def framework_op_type(provenance: str) -> str:
    """The "Framework Op type" column: the op type of a provenance `name:type` (the part after the last
    colon, after the last slash), else the last path element of its name; "-" when neither has text."""
    if not provenance:
        return "-"
    text = re.sub(r"^.*/", "", re.sub(r"^.*:", "", provenance))
    if not text:
        text = re.sub(r"^.*/", "", provenance.split(":")[0])
    return text or "-"


def by_wasted_time(children: list[Node], root: Node) -> list[Node]:
    """XProf's "Order by wasted time": most wasted first, nodes without a wasted time last, ties in tree order."""
    keyed = [(wasted_time_fraction(c, root), i, c) for i, c in enumerate(children)]
    return [c for w, i, c in sorted(keyed, key=lambda k: (k[0] is None, -(k[0] or 0.0), k[1]))]


# --- XProf's JSON form -------------------------------------------------------------------------

def _metrics_json(m: Metrics) -> dict:
    return {
        "flops": m.flops, "bandwidthUtils": list(m.bandwidth_utils), "rawTime": m.raw_time, "rawFlops": m.raw_flops,
        "rawBytesAccessedArray": list(m.raw_bytes_accessed), "occurrences": m.occurrences,
        "avgTimePs": m.avg_time_ps, "bf16Flops": m.bf16_flops, "uncappedFlops": m.uncapped_flops,
        "normalizedTimePs": m.normalized_time_ps,
    }


def _symbol_json(s: Symbol) -> dict:
    return {
        "op": "", "expression": s.expression, "provenance": s.provenance, "category": s.category,
        "computationPrimitiveSize": 0, "fingerprint": str(s.fingerprint), "programId": str(s.program_id),
        "sourceInfo": {"fileName": s.source_file, "lineNumber": s.source_line, "stackFrame": s.source_stack},
        "xprofKernelMetadata": s.kernel_metadata,
    }


def xprof_json(node: Node) -> dict:
    """The node as XProf prints it (proto JSON with default values)."""
    out: dict = {"name": node.name}
    if node.metrics is not None:
        out["metrics"] = _metrics_json(node.metrics)
    out["children"] = [xprof_json(c) for c in node.children]
    if node.symbol is not None:
        out["xla"] = _symbol_json(node.symbol)
    out["numChildren"] = node.num_children
    return out


def walk(node: Node, path: tuple[str, ...] = ()):
    """(path of ancestor names, node) for every node, depth first."""
    yield path, node
    for child in node.children:
        yield from walk(child, (*path, node.name))




# --- the tool: the run's four trees -------------------------------------------------------------------


@dataclass
class OpProfileData:
    run: DeviceRun  # the run's device ops, all hosts combined
    trees: dict[tuple[str, bool], Node] = field(default_factory=dict)  # (grouping, exclude idle) → tree
    # A run of several device hosts: each host's own trees, as XProf's op profile shows one host at a time.
    per_host: dict[str, dict[tuple[str, bool], Node]] = field(default_factory=dict)

    @property
    def device_type(self) -> str:
        return self.run.op_stats.environment.device_type


def build_trees(run: DeviceRun) -> dict[tuple[str, bool], Node]:
    db = run.op_stats.device_db
    totals = ProfileTotals(total_time_ps=db.total_time_ps, total_op_time_ps=db.total_op_time_ps)
    return {
        (group, exclude): build_op_profile(run.records, run.details.hlo, run.details.program_names,
                                           run.op_stats.perf_env, totals, group, exclude)
        for group in GROUPINGS for exclude in (False, True)
    }


def op_profile_data(host_names: list[str], parts: dict[str, DevicePart]) -> OpProfileData | None:
    """The run's op profile: grouped by program and by category, with idle time and without; all hosts
    combined and, for a run of several device hosts, each host alone."""
    device = combine_device_parts(host_names, parts)
    if device is None or device.records.empty:
        return None
    per_host = {}
    if len(device.hosts) > 1:  # XProf offers the op profile of each host (not of all hosts together)
        for host in device.hosts:
            alone = combine_device_parts([host], {host: parts[host]})
            if alone is not None and not alone.records.empty:
                per_host[host] = build_trees(alone)
    return OpProfileData(run=device, trees=build_trees(device), per_host=per_host)


def headline_numbers(data: OpProfileData) -> dict:
    """Headline numbers: the device's FLOPS and HBM bandwidth utilization over all its time."""
    root = data.trees[("program", False)]
    m = root.metrics
    return {
        "flops_utilization_percent": 100.0 * m.flops_utilization if m else 0.0,
        "hbm_utilization_percent": 100.0 * m.bandwidth_utils[0] if m else 0.0,
        "idle_percent": 100.0 * data.run.op_stats.device_db.idle_ratio,
    }


def op_profile_summary(data: OpProfileData) -> OpProfileBlock:
    """The run's `op_profile` block of summary.json: FLOPS utilization and the time per category."""
    by_category = data.trees[("category", False)]
    total = by_category.metrics.raw_time if by_category.metrics else 0.0
    # A tree of one op (e.g. idle time only) is that op itself, as XProf collapses it.
    nodes = [by_category] if by_category.symbol is not None else by_category.children
    categories = tuple(OpCategory(name=c.symbol.category if c.symbol else c.name,
                                  time_percent=round(100.0 * safe_divide(c.metrics.raw_time, total), 3))
                       for c in nodes if c.metrics is not None)
    headline = headline_numbers(data)
    perf = data.run.op_stats.perf_env
    return OpProfileBlock(
        flops_utilization_percent=float(f'{headline["flops_utilization_percent"]:.6g}'),
        categories=categories,
        hbm_utilization_percent=float(f'{headline["hbm_utilization_percent"]:.6g}'),
        idle_percent=float(f'{headline["idle_percent"]:.6g}'),
        peak_flop_rate=float(perf.peak_tera_flops_per_second) * 1e12,  # FLOP/s
        peak_hbm_bandwidth=float((list(perf.peak_bws_giga_bytes_per_second) or [0.0])[0]) * 1e9,  # bytes/s
        top_ops=tuple(DeviceOp(**op) for op in top_ops(data, TOP_OPS_IN_SUMMARY)),
    )


TOP_OPS_IN_SUMMARY = 5


def top_ops(data: OpProfileData, count: int) -> list[dict]:
    """The ops (or groups of duplicated ops) with the most device time, idle excluded (XProf's default view)."""
    root = data.trees[("category", True)]
    total = root.metrics.raw_time if root.metrics else 0.0
    ops = [op for category in root.children for op in (category.children or [category]) if op.metrics]
    ops.sort(key=lambda n: -n.metrics.raw_time)
    return [{"name": op.name, "category": op.symbol.category if op.symbol else "",
             "time_percent": 100.0 * safe_divide(op.metrics.raw_time, total),
             "time_ms": op.metrics.raw_time / 1e9,
             "flops_utilization_percent": 100.0 * op.metrics.flops_utilization,
             "hbm_utilization_percent": 100.0 * op.metrics.bandwidth_utils[0]} for op in ops[:count]]


__all__ = ["CHILDREN_LIMIT", "GROUPINGS", "Metrics", "Node", "OpProfileData", "ProfileTotals", "Symbol",
           "build_op_profile", "by_wasted_time", "framework_op_type", "hbm_fraction", "headline_numbers",
           "op_profile_data", "op_profile_summary", "giga_to_gibi", "gibi_to_giga", "is_fusion", "time_fraction",
           "walk", "wasted_time_fraction", "xprof_json"]
