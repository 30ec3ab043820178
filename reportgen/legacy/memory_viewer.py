"""Cloud TPU `<host>.memory_viewer.json` on the memory viewer page.

The file is XLA's HloProto (the module and its buffer assignment with the heap-simulator trace) in proto3
JSON form. It is parsed into the HLO schema (ids resolved from names where the file has none or repeats
them), converted like an XSpace capture's modules (`reportgen.loaders.hlo`) and replayed by the memory
viewer's converter (`reportgen.core.tools.memory_viewer`); the page says what the format cannot provide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf import json_format

from reportgen.core.hlo.model import HloModule, HloProto
from reportgen.core.tools.memory_viewer import HostMemoryViewer, ModuleViews, memory_colors, memory_space_view
from reportgen.errors import CaptureError
from reportgen.loaders.hlo import plain_hlo
from reportgen.loaders.proto import hlo_pb2


@dataclass
class LegacyMemoryViewer:
    source: str
    hlo: HloProto = field(repr=False)  # module and buffer assignment, ids resolved by name


def memory_viewer_from_json(name: str, data: bytes) -> LegacyMemoryViewer:
    """`capture_tpu_profile`'s memory_viewer.json: an HloProto in proto3 JSON.

    Fields the HLO schema subset does not declare (the older layout `format`,
    `maxSparseElements`, the buffer's `computationName`, …) are skipped. The
    file's buffers name their defining instruction (`definedAt.instructionName`);
    the replay looks instructions up by id, so ids are resolved from the names
    here (and numbered afresh when the file's ids are missing or repeated).
    """
    proto = hlo_pb2.HloProto()
    try:
        json_format.Parse(data, proto, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise CaptureError(name, f"is not an HloProto in JSON form ({exc})") from exc
    if not proto.buffer_assignment.logical_buffers:
        raise CaptureError(name, "holds no buffer assignment (no logical buffers)")
    instructions = [i for c in proto.hlo_module.computations for i in c.instructions]
    if len({i.id for i in instructions}) != len(instructions):
        for number, instruction in enumerate(instructions):
            instruction.id = number
    by_name = {}
    for instruction in instructions:
        by_name.setdefault(instruction.name, instruction.id)
    for buffer in proto.buffer_assignment.logical_buffers:
        located = buffer.defined_at
        if located.instruction_name in by_name:
            located.instruction_id = by_name[located.instruction_name]
    return LegacyMemoryViewer(source=name, hlo=plain_hlo(proto))


MEMORY_VIEWER_NOTE = (
    "From the Cloud TPU capture's {source}: XLA's HloProto (the module and its buffer assignment with the "
    "heap-simulator trace) in JSON form, replayed as the memory viewer replays an XSpace capture's modules. "
    "What this format cannot provide: the program id (the module is named without one), the device's memory "
    "capacity (so no out-of-memory check), the other programs of the run (the file holds one module), and "
    "source locations beyond what the instructions' metadata names."
)
RELAXED_NOTE = (
    " XProf's memory viewer refuses this module today ({error}); TensorBoard's memory viewer of the day, which "
    "read these files, replayed the trace without that check, and so does this page: its numbers are that replay's."
)
SINGLE_ALLOCATION_CHECK = "single buffer allocation"


def legacy_memory_viewer(m: LegacyMemoryViewer) -> HostMemoryViewer:
    """The memory viewer's per-host part for a Cloud TPU memory_viewer.json."""
    name = m.hlo.hlo_module.name or m.source.removesuffix(".memory_viewer.json")
    module = HloModule(program_id=0, name=name, hlo=m.hlo)
    note = MEMORY_VIEWER_NOTE.format(source=m.source)
    views = []
    for space in memory_colors(module):
        view = memory_space_view(module, space)
        if view.error and SINGLE_ALLOCATION_CHECK in view.error:
            refused = view.error.removeprefix("Failed to process heap simulator trace: ")
            view = memory_space_view(module, space, single_allocation=False)
            if RELAXED_NOTE.format(error=refused) not in note:
                note += RELAXED_NOTE.format(error=refused)
        view.module = name  # no program id in this format: the module keeps its own name
        views.append(view)
    return HostMemoryViewer(modules={name: ModuleViews(name, views, note=note)})
