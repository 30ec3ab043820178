"""Where the site shows each number: CSV paths, row anchors and timeline links of a run's pages.

The sections write their CSVs and row ids with these names, and the findings
point at them with the same names, so a finding's link always lands on the
row that shows its number. Paths are relative to the run's folder.
"""

from __future__ import annotations

from urllib.parse import quote

from reportgen.names import file_part, joined_file_name

OVERVIEW_STEPS_CSV = "data/overview/steps.csv"
INPUT_STEPS_CSV = "data/input_pipeline/steps.csv"
INPUT_OPS_CSV = "data/input_pipeline/input_ops.csv"
TF_DATA_PIPELINES_CSV = "data/input_pipeline/tf_data_pipelines.csv"
TF_DATA_ITERATORS_CSV = "data/input_pipeline/tf_data_iterators.csv"
TF_STATS_CSV = "data/tf_stats/framework_op_stats.csv"
KERNEL_STATS_CSV = "data/kernel_stats/kernel_stats.csv"
HLO_STATS_CSV = "data/hlo_stats/hlo_stats.csv"
OP_PROFILE_CSV = "data/op_profile/op_profile.csv"
LEDGER_HREF = "index.html#step-ledger"  # the run summary's "Where the step goes"


def safe_file_part(text: str, room: int = 0) -> str:
    """A name from a capture usable in a file name and a URL path segment without surprises, unique
    (reportgen/names.py); `room`: the bytes appended to it in the same file name."""
    return file_part(text, room)


def memory_profile_csv(host: str, memory_id: str) -> str:
    """The memory breakdown at the peak of one allocator of one host."""
    return "data/memory_profile/" + joined_file_name([host, memory_id], "__", "__breakdown.csv")


def memory_viewer_csv(module: str) -> str:
    """The buffers live at the peak of one HLO module (`name(program id)`)."""
    return f"data/memory_viewer/{file_part(module, len('__buffers.csv'))}__buffers.csv"


# Row ids. Tables shown once per host view carry them in their first view (the run's: all hosts
# combined, or the only host), which is the one the CSV downloads hold.

def step_anchor(step_num: int) -> str:
    """A step's row in the overview's steps table."""
    return f"step-{int(step_num)}"


def input_step_anchor(step_num: int) -> str:
    """A step's row in the input pipeline's steps table."""
    return f"input-step-{int(step_num)}"


def iterator_anchor(position: int) -> str:
    """An iterator's row in the input pipeline's tf.data iterator table (its position in the tree)."""
    return f"iterator-{int(position)}"


def tf_op_anchor(rank: int) -> str:
    """An op's row in the TF stats table with idle time (the table of framework_op_stats.csv), by rank."""
    return f"tf-op-{int(rank)}"


def kernel_anchor(rank: int) -> str:
    """A kernel's row in the GPU kernel stats table of the run (all hosts), by rank."""
    return f"kernel-{int(rank)}"


def hlo_op_anchor(rank: int) -> str:
    """An HLO op's row in the HLO op stats table, by rank."""
    return f"hlo-op-{int(rank)}"


def memory_profile_anchor(host: str, memory_id: str) -> str:
    """An allocator's panel on the memory profile page."""
    return "allocator-" + joined_file_name([host, memory_id], "__")


def memory_viewer_anchor(module: str) -> str:
    """A module's section on the memory viewer page."""
    return "module-" + safe_file_part(module)


def timeline_href(host: str | None, t0_ps: int | None = None, t1_ps: int | None = None, q: str | None = None,
                  step: str | None = None) -> str:
    """The trace page's timeline at a host (None: the page's first) and time range (ms on the trace's clock) or
    step (a number, or a name ending in one), with the first event named like `q` selected:
    `trace.html#host=H&t0=MS&t1=MS&step=S&q=NAME`, as the trace page reads it."""
    parts = [("host", host)] if host is not None else []
    if t0_ps is not None and t1_ps is not None:
        parts += [("t0", _ms(t0_ps)), ("t1", _ms(t1_ps))]
    if step is not None:
        parts.append(("step", step))
    if q:
        parts.append(("q", q))
    return "trace.html#" + "&".join(f"{k}={quote(str(v), safe='')}" for k, v in parts)


def graph_viewer_href(op: str, program: str | int | None = None, module: str | None = None) -> str:
    """The graph viewer at an HLO op of a module (by name) or of a program (by id), as the graph viewer reads it."""
    where = f"module={quote(module, safe='')}" if module else f"program={quote(str(program or ''), safe='')}"
    return f"graph_viewer.html#{where}&op={quote(op, safe='')}"


def _ms(ps: int) -> str:
    """Picoseconds as milliseconds to the nanosecond, without trailing zeros."""
    text = f"{ps / 1e9:.6f}".rstrip("0").rstrip(".")
    return text or "0"


__all__ = ["HLO_STATS_CSV", "INPUT_OPS_CSV", "INPUT_STEPS_CSV", "KERNEL_STATS_CSV", "LEDGER_HREF", "OP_PROFILE_CSV",
           "OVERVIEW_STEPS_CSV", "TF_DATA_ITERATORS_CSV", "TF_DATA_PIPELINES_CSV", "TF_STATS_CSV", "graph_viewer_href",
           "hlo_op_anchor", "input_step_anchor", "iterator_anchor", "kernel_anchor", "memory_profile_anchor",
           "memory_profile_csv", "memory_viewer_anchor", "memory_viewer_csv", "safe_file_part", "step_anchor",
           "tf_op_anchor", "timeline_href"]
