"""Rules over memory: allocators near their capacity (memory profile), HLO programs whose peak comes close to
the device's memory (memory viewer), and memory lost to layout padding."""

from __future__ import annotations

from reportgen.core.findings.inputs import RunInputs, pick
from reportgen.core.findings.model import Evidence, Finding, Link, csv_source, summary_source
from reportgen.core.pages import memory_profile_anchor, memory_profile_csv, memory_viewer_anchor, memory_viewer_csv
from reportgen.core.tools.memory_profile import BREAKDOWN_COLUMNS, NEAR_CAPACITY
from reportgen.core.tools.memory_viewer import near_capacity

HIGH_PERCENT = 95.0  # of capacity: an out-of-memory error is one step away
PADDING_PERCENT = 10.0  # of a program's peak memory
PADDING_MIN_BYTES = 1 << 20
TOP = 3

_MEMORY_ACTION_TF = ("Lower the peak: a smaller batch (or gradient accumulation over micro-batches), mixed precision "
                     "(16-bit activations), `tf.recompute_grad` on large blocks, and "
                     "`tf.config.experimental.set_memory_growth` only if another process shares the device.")
_MEMORY_ACTION_JAX = ("Lower the peak: a smaller batch (or gradient accumulation), bfloat16 activations, "
                      "rematerialisation (`jax.checkpoint` on large blocks), donating buffers that are replaced "
                      "(`donate_argnums`), and sharding large arrays over more devices.")


def allocators_near_capacity(inputs: RunInputs) -> list[Finding]:
    """Allocators whose peak comes within 10% of their capacity, or that failed to allocate."""
    found = []
    for host, part in inputs.memory_profile.items():
        for memory_id, profile in part.profiles.items():
            if not profile.out_of_memory and not part.oom_messages:
                continue
            key = f"{host}/{memory_id}"
            capacity = profile.memory_capacity
            percent = 100.0 * profile.peak_bytes / capacity if capacity else 0.0
            page = inputs.page("memory_profile", memory_profile_anchor(host, memory_id))
            evidence = [
                Evidence(f"Peak memory in use ({key})", profile.peak_bytes, "bytes",
                         summary_source("memory", "profiles", key, "peak_bytes"), page),
                Evidence(f"Allocator capacity ({key})", capacity, "bytes",
                         summary_source("memory", "profiles", key, "capacity_bytes"), page),
            ]
            if profile.failed_allocations:
                evidence.append(Evidence("Allocations that failed", profile.failed_allocations, "count", None, page))
            evidence += [Evidence("Out-of-memory message in the capture", m, "", None, page)
                         for m in part.oom_messages[:1]]
            top = profile.breakdown.sort_values("allocation_bytes", ascending=False, kind="stable").head(TOP)
            evidence += [Evidence(f"Live at the peak: {row.op} {row.shape}".rstrip(), int(row.allocation_bytes),
                                  "bytes", csv_source(memory_profile_csv(host, memory_id),
                                                      {BREAKDOWN_COLUMNS["op"]: row.op},
                                                      BREAKDOWN_COLUMNS["allocation_bytes"]), page)
                         for row in top.itertuples()]
            failed = profile.failed_allocations > 0 or bool(part.oom_messages)
            found.append(Finding(
                id="memory.near_capacity", severity="high" if failed or percent >= HIGH_PERCENT else "medium",
                title=(f"Allocator {key} ran out of memory" if failed else
                       f"Allocator {key} peaks at {percent:.1f}% of its capacity: out-of-memory risk"),
                estimate="The allocator's peak bytes in use; the risk grows as it nears capacity (within "
                         f"{100 * NEAR_CAPACITY:.0f}%), and a larger batch or input will not fit.",
                action=pick(inputs.framework, _MEMORY_ACTION_TF, _MEMORY_ACTION_JAX)
                + " The largest allocations live at the peak are listed in the evidence.",
                evidence=evidence, links=[Link(f"Memory profile: {key}", page)], bytes=int(profile.peak_bytes),
            ))
    return found


def programs_near_capacity(inputs: RunInputs) -> list[Finding]:
    """HLO programs whose peak heap comes within 10% of the device's memory."""
    data = inputs.memory_viewer
    if not data:
        return []
    found = []
    for name, module in data["modules"].items():
        for view in module.spaces:
            if view.memory_space != 0:
                continue
            oom = near_capacity(view, data["capacity"])
            if oom is None:
                continue
            page = inputs.page("memory_viewer", memory_viewer_anchor(name))
            evidence = [Evidence(f"Peak heap of {name}", view.peak_bytes, "bytes",
                                 summary_source("memory", "modules", name, "peak_bytes"), page),
                        Evidence("Device memory capacity", oom["capacity"], "bytes", None, page)]
            evidence += [Evidence(f"Buffer live at the peak: {o.instruction_name or o.label} {o.shape}".rstrip(),
                                  int(o.size_bytes), "bytes",
                                  csv_source(memory_viewer_csv(name), {"Memory space": 0,
                                                                       "Instruction": o.instruction_name or o.label},
                                             "Size (bytes)"), page)
                         for o in oom["top"][:TOP]]
            found.append(Finding(
                id="memory.program_near_capacity", severity="high" if oom["percent"] >= HIGH_PERCENT else "medium",
                title=f"Program {name} peaks at {oom['percent']:.1f}% of device memory: out-of-memory risk",
                estimate="The program's peak heap (XLA's buffer assignment) against the largest allocator capacity "
                         "the capture records.",
                action=pick(inputs.framework, _MEMORY_ACTION_TF, _MEMORY_ACTION_JAX)
                + " The largest buffers live at the peak are listed in the evidence.",
                evidence=evidence, links=[Link(f"Memory viewer: {name}", page)], bytes=int(view.peak_bytes),
            ))
    return found


def padding(inputs: RunInputs) -> list[Finding]:
    """Programs whose peak memory is inflated by layout padding."""
    data = inputs.memory_viewer
    if not data:
        return []
    found = []
    for name, module in data["modules"].items():
        view = next((v for v in module.spaces if v.memory_space == 0), None)
        if view is None or not view.peak_bytes:
            continue
        extra = view.peak_bytes - view.peak_unpadded_bytes
        share = 100.0 * extra / view.peak_bytes
        if extra < PADDING_MIN_BYTES or share < PADDING_PERCENT:
            continue
        page = inputs.page("memory_viewer", memory_viewer_anchor(name))
        rows = [r for r in view.max_heap if r.logical_buffer_id >= 0 and r.size_bytes > r.unpadded_bytes]
        rows.sort(key=lambda o: -(o.size_bytes - o.unpadded_bytes))
        found.append(Finding(
            id="memory.padding", severity="medium" if share >= 25.0 else "low",
            title=f"Layout padding makes up {share:.1f}% of program {name}'s peak memory",
            estimate="The program's peak heap minus the same buffers without the padding their tiled layouts add.",
            action="Make the padded dimensions multiples of the layout's tiles (the memory viewer shows each "
                   "buffer's shape and expansion): e.g. feature sizes multiples of 128 and batch sizes multiples of "
                   "8 on TPUs.",
            evidence=[Evidence(f"Peak heap of {name}", view.peak_bytes, "bytes",
                               summary_source("memory", "modules", name, "peak_bytes"), page),
                      Evidence("The same without padding", view.peak_unpadded_bytes, "bytes",
                               summary_source("memory", "modules", name, "peak_unpadded_bytes"), page),
                      *[Evidence(f"{o.instruction_name or o.label} {o.shape}: extra memory",
                                 o.size_bytes - o.unpadded_bytes, "bytes", csv_source(memory_viewer_csv(name),
                                                     {"Memory space": 0, "Instruction": o.instruction_name or o.label},
                                                     "Extra memory (bytes)"), page) for o in rows[:TOP]]],
            links=[Link(f"Memory viewer: {name}", page)], bytes=int(extra),
        ))
    return found


__all__ = ["allocators_near_capacity", "padding", "programs_near_capacity"]
