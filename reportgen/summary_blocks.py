"""summary.json as types: every block a frozen dataclass, written by `to_json` and read back by `from_json`.

The sections build these values (`Section.summary`), the build writes each run's once (`RunSummary.to_json`), and
everything that reads a built site (the run page's answer, `compare`, the budgets, the pull-request summary, the
trends) reads them through `SiteSummary.from_json`. A block's fields are its summary.json keys, in the order the
file holds them; `to_json` writes the values as given, so the file is what it was when the sections wrote dicts.

`from_json` reads what any earlier build wrote: a missing key takes the field's default, a value of the wrong kind
(text where a number belongs, a boolean counted as a number) reads as the default too, as the readers treated it
before these types. NaN stays a float (the readers that need a finite number ask `finite`).

`SCHEMA_VERSION` is summary.json's `schema`: raise it when a key changes meaning or goes; a new key needs no new
version (older files read it as its default). docs/summary-json.md lists every key, generated from these types
(`scripts/summary_contract.py`); `tests/test_summary_blocks.py` checks it, and the keys README.md names, against them.

Nothing here imports the rest of reportgen: the core's converters, the sections, `compare/` and `ci/` all use it.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Union

SCHEMA_VERSION = 1

Json = Any  # a value kept as summary.json holds it (its shape is owned elsewhere: stated where it is used)


def finite(value: Any) -> float | None:
    """A summary.json value as a finite float, or None (missing, text, a boolean, NaN, infinite)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# Field options. A field is written always (None as null) unless it says otherwise:
def omitted_if_none(default: Any = None) -> Any:
    """A key the file holds only when it has a value."""
    return field(default=default, metadata={"omit": "none"})


def omitted_if_empty() -> Any:
    """A list the file holds only when it is not empty."""
    return field(default=(), metadata={"omit": "empty"})


def omitted_with(other: str) -> Any:
    """A key the file holds exactly when `other` is held (its own value may be null)."""
    return field(default=None, metadata={"omit": ("with", other)})


class Block:
    """What every block shares: its JSON form from its fields, and its reading back."""

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if _omitted(self, f, value):
                continue
            out[f.name] = _dump(value)
        return out

    @classmethod
    def from_json(cls, data: Any) -> typing.Self:
        if not isinstance(data, dict):
            data = {}
        hints = _hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in data:
                value = _load(hints[f.name], data[f.name])
                if value is not _INVALID:
                    kwargs[f.name] = value
        return cls(**kwargs)


def _omitted(block: Block, f: dataclasses.Field, value: Any) -> bool:
    rule = f.metadata.get("omit")
    if rule == "none":
        return value is None
    if rule == "empty":
        return not value
    if isinstance(rule, tuple):
        return getattr(block, rule[1]) is None
    return False


def _dump(value: Any) -> Json:
    if isinstance(value, Block):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value  # as the producer gave it: an int stays an int, a float's digits stay its digits


_INVALID = object()


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _load(hint: Any, value: Any) -> Any:
    """`value` read as `hint` says, or _INVALID (the field keeps its default)."""
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        for option in options:
            loaded = _load(option, value)
            if loaded is not _INVALID:
                return loaded
        return _INVALID
    if origin is tuple:
        if not isinstance(value, list):
            return _INVALID
        item = typing.get_args(hint)[0]
        loaded = [_load(item, v) for v in value]
        return tuple(v for v in loaded if v is not _INVALID)
    if origin is dict:
        if not isinstance(value, dict):
            return _INVALID
        item = typing.get_args(hint)[1]
        out = {str(k): _load(item, v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _INVALID}
    if isinstance(hint, type) and issubclass(hint, Block):
        return hint.from_json(value) if isinstance(value, dict) else _INVALID
    if hint is float:
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else _INVALID
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _INVALID
    if hint is bool:
        return value if isinstance(value, bool) else _INVALID
    if hint is str:
        return value if isinstance(value, str) else _INVALID
    raise TypeError(f"no reading of {hint!r} in summary.json")  # a field typed in a way this module cannot read


# ---- overview ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StepTime(Block):
    """A view's step time in ms (XProf's step-time summary)."""

    average: float | None = None
    minimum: float | None = None
    maximum: float | None = None
    standard_deviation: float | None = None


@dataclass(frozen=True)
class StepCategory(Block):
    """The step-time category with the most time (`core/steps/categories.py`'s keys and labels)."""

    category: str = ""
    label: str = ""
    percent: float | None = None


@dataclass(frozen=True)
class OverviewOp(Block):
    name: str = ""
    category: str = ""
    self_time_ms: float | None = None
    self_time_percent: float | None = None


@dataclass(frozen=True)
class HostSteps(Block):
    """One host's own step count and time, in a run of several hosts."""

    steps: int = 0
    step_time_ms: StepTime = StepTime()


@dataclass(frozen=True)
class OverviewBlock(Block):
    """`overview`: XProf's overview page of the run (all hosts combined)."""

    steps: int = 0
    step_time_ms: StepTime = StepTime()
    breakdown_ms: dict[str, float | None] = field(default_factory=dict)  # average ms per step category
    input_percent: float | None = None
    input_bound: str | None = None  # HIGHLY, MODERATELY, NOT; null without steps
    device_idle_percent: float | None = None
    host_idle_percent: float | None = None
    device_type: str = ""
    device_core_count: int = 0
    host_count: int = 0
    host_op_time_eager_percent: float | None = None
    device_op_time_eager_percent: float | None = None
    device_op_time_outside_compilation_percent: float | None = None
    device_compute_16bit_percent: float | None = None
    device_compute_32bit_percent: float | None = None
    statement: str = ""  # XProf's input-bound statement ("" without steps)
    bottleneck: StepCategory | None = None
    top_ops_on_device: bool = False
    top_ops: tuple[OverviewOp, ...] = ()
    is_training: bool = False
    per_host: dict[str, HostSteps] | None = omitted_if_none()


@dataclass(frozen=True)
class RecordedOverviewBlock(Block):
    """`overview` of a run of older profilers' files: what the recorded overview holds (`source`: its file kind)."""

    source: str = ""
    steps: int = 0
    step_time_ms: StepTime | None = omitted_if_none()
    breakdown_ms: dict[str, float | None] | None = omitted_if_none()
    input_percent: float | None = omitted_if_none()
    input_bound: str | None = omitted_if_none()
    device_idle_percent: float | None = omitted_if_none()
    host_idle_percent: float | None = omitted_if_none()
    device_core_count: int | None = omitted_if_none()
    host_count: int | None = omitted_if_none()
    device_type: str = ""
    statement: str | None = omitted_if_none()
    bottleneck: StepCategory | None = omitted_with("statement")

    # What an XSpace overview holds and a recorded one does not.
    per_host: ClassVar[None] = None
    top_ops: ClassVar[tuple] = ()


Overview = OverviewBlock | RecordedOverviewBlock


# ---- input pipeline ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InputBottleneck(Block):
    """The tf.data iterator XProf's input pipeline analysis names as the bottleneck."""

    iterator: str = ""
    self_time_ms: float | None = None  # its self time over the capture
    latency_ms: float | None = None  # its self time in the pipeline's slowest execution
    host: str = ""
    input_pipeline: str = ""
    max_latency_ms: float | None = None


@dataclass(frozen=True)
class InputPipelineBlock(Block):
    """`input_pipeline`: the host's input time by stage and the tf.data bottleneck."""

    input_percent: float | None = None
    input_bound: str | None = None
    host_ms: dict[str, float | None] = field(default_factory=dict)  # ms per input stage, over the capture
    bottleneck: InputBottleneck | None = None


@dataclass(frozen=True)
class RecordedInputPipelineBlock(Block):
    """`input_pipeline` of a run of older profilers' files."""

    host_ms: dict[str, float | None] = field(default_factory=dict)
    input_percent: float | None = omitted_if_none()

    input_bound: ClassVar[None] = None
    bottleneck: ClassVar[None] = None


InputPipeline = InputPipelineBlock | RecordedInputPipelineBlock


# ---- op tables --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TfStatsOp(Block):
    side: str = ""  # Host or Device
    name: str = ""
    type: str = ""
    self_time_us: float | None = None
    self_time_percent: float | None = None  # of the side's op time, IDLE excluded


@dataclass(frozen=True)
class TfStatsBlock(Block):
    """`tf_stats`: framework ops, IDLE excluded (older captures' recorded table too, without `task_type`)."""

    ops: int = 0
    host_self_us: float | None = None
    device_self_us: float | None = None
    task_type: str | None = omitted_if_none()
    top_ops: tuple[TfStatsOp, ...] = ()  # the largest of each side, device first


@dataclass(frozen=True)
class Kernel(Block):
    """GPU kernels of one name (every launch configuration and op)."""

    name: str = ""
    total_us: float | None = None
    occurrences: int = 0
    percent: float | None = None  # of all kernel time


@dataclass(frozen=True)
class KernelStatsBlock(Block):
    """`kernel_stats` (older captures' recorded table too, without `top_kernels`)."""

    kernels: int = 0  # kernel–op rows
    total_us: float | None = None
    tensor_core_percent: float | None = None
    top_kernels: tuple[Kernel, ...] | None = omitted_if_none()


@dataclass(frozen=True)
class OpCategory(Block):
    name: str = ""
    time_percent: float | None = None


@dataclass(frozen=True)
class DeviceOp(Block):
    """An XLA op (or group of duplicated ops) of the op profile, idle excluded."""

    name: str = ""
    category: str = ""
    time_percent: float | None = None
    time_ms: float | None = None
    flops_utilization_percent: float | None = None
    hbm_utilization_percent: float | None = None


@dataclass(frozen=True)
class OpProfileBlock(Block):
    """`op_profile`: the device's utilisation and its time per XLA op category."""

    flops_utilization_percent: float | None = None
    categories: tuple[OpCategory, ...] = ()
    hbm_utilization_percent: float | None = None
    idle_percent: float | None = None
    peak_flop_rate: float | None = None  # FLOP/s
    peak_hbm_bandwidth: float | None = None  # bytes/s
    top_ops: tuple[DeviceOp, ...] = ()


@dataclass(frozen=True)
class RecordedOpProfileBlock(Block):
    """`op_profile` of a run of older profilers' files."""

    categories: tuple[OpCategory, ...] = ()
    flops_utilization_percent: float | None = omitted_if_none()

    top_ops: ClassVar[tuple] = ()


OpProfile = OpProfileBlock | RecordedOpProfileBlock


# ---- memory -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Allocator(Block):
    """One allocator of the memory profile, at its peak."""

    peak_bytes: int | None = None
    peak_time_ms: float | None = None
    capacity_bytes: int | None = None
    fragmentation_percent: float | None = None
    allocations: int = 0
    deallocations: int = 0


@dataclass(frozen=True)
class ProgramMemory(Block):
    """One XLA program's memory peak (memory viewer, default memory space)."""

    peak_bytes: int | None = None
    peak_unpadded_bytes: int | None = None


@dataclass(frozen=True)
class MemoryBlock(Block):
    """`memory`: the memory profile's allocators (keyed `<host>/<memory id>`) and the memory viewer's programs."""

    profiles: dict[str, Allocator] | None = omitted_if_none()
    modules: dict[str, ProgramMemory] | None = omitted_if_none()

    def merged(self, other: MemoryBlock) -> MemoryBlock:
        """Both sections' parts of the block (each writes its own key)."""
        return MemoryBlock(profiles=other.profiles if other.profiles is not None else self.profiles,
                           modules=other.modules if other.modules is not None else self.modules)


# ---- the rest of the tools --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GraphModule(Block):
    instructions: int = 0
    computations: int = 0
    text_differences: tuple[str, ...] = ()  # what the HLO printer cannot reproduce, one sentence each


@dataclass(frozen=True)
class GraphViewerBlock(Block):
    """`graph_viewer`: each HLO module the graph viewer draws."""

    modules: dict[str, GraphModule] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceBlock(Block):
    """`trace`: the timeline export's files."""

    chunks: int = 0
    events: int = 0
    bytes: int = 0
    not_produced: tuple[Json, ...] = omitted_if_empty()  # what a host's export left out, and why (trace.py)


@dataclass(frozen=True)
class InventoryBlock(Block):
    """`inventory`: when the run was captured (its earliest host's profile start)."""

    profile_start_ns: int | None = None
    profile_start: str = ""  # ISO 8601, UTC


@dataclass(frozen=True)
class RecordedTimelineBlock(Block):
    """`legacy_timeline`: ProfilerHook timelines' step statistics."""

    steps: int = 0
    ops: int = 0
    step_time_ms_average: float | None = None


@dataclass(frozen=True)
class RecordedPodViewerBlock(Block):
    """`legacy_pod_viewer`: the recorded pod viewer's size."""

    steps: int = 0
    cores: int = 0
    all_reduce_ops: int = 0


# ---- the step ledger --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LedgerEvent(Block):
    """Events of one name that a cause's time was read from."""

    name: str = ""
    events: int = 0
    ms_per_step: float | None = None


@dataclass(frozen=True)
class LedgerStep(Block):
    host: str = ""
    step: str = ""
    begin_ps: int = 0
    duration_ms: float = 0.0
    ms: dict[str, float] = field(default_factory=dict)  # per cause


@dataclass(frozen=True)
class LedgerSteady(Block):
    """The listed steps' spread, the start-up step left out (ms)."""

    steps: int = 0
    average_ms: float = 0.0
    standard_deviation_ms: float = 0.0
    minimum_ms: float = 0.0
    maximum_ms: float = 0.0


@dataclass(frozen=True)
class LedgerOneOff(Block):
    """An event of a start-up step that ran longer than in any later step."""

    name: str = ""
    ms: float = 0.0


@dataclass(frozen=True)
class LedgerStartup(LedgerStep):
    """A host's first step, set aside as start-up: its time once, by cause, and the one-off events in it."""

    one_off: tuple[LedgerOneOff, ...] = ()


@dataclass(frozen=True)
class StepLedgerBlock(Block):
    """`step_ledger`: each step's time given to one cause (`core/steps/ledger.py`)."""

    steps: int = 0
    inferred_from: str = ""  # what the steps were inferred from ("" when the capture marks them)
    has_device: bool = False
    precedence: tuple[str, ...] = ()  # the causes, in the order the ledger gives them time
    labels: dict[str, str] = field(default_factory=dict)
    step_time_ms: float | None = None
    average_ms: dict[str, float] = field(default_factory=dict)
    percent: dict[str, float | None] = field(default_factory=dict)
    top: dict[str, tuple[LedgerEvent, ...]] = field(default_factory=dict)
    per_step: tuple[LedgerStep, ...] = ()  # the first MAX_STEPS_LISTED steps
    per_step_left_out: int = 0
    # The capture's marked steps that XProf's step analysis (and so the ledger) leaves out: it cannot take them
    # whole (at the capture's ends).
    steps_not_analysed: int = 0
    gpu_private_threads: bool = False
    python_generator: bool = False
    distributed_iterator: bool = False
    tf_data_threads_busy: float | None = None
    input_python_percent: float | None = None
    steady: LedgerSteady = field(default_factory=LedgerSteady)  # the steps' spread, start-up left out
    startup: tuple[LedgerStartup, ...] = ()  # each host's first step, when set aside as start-up


# ---- findings ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FindingEvidence(Block):
    label: str = ""
    value: float | int | str | None = None
    unit: str = ""
    source: Json = None  # where the site shows it (core/findings/model.py's Evidence.source)
    href: str = ""


@dataclass(frozen=True)
class FindingLink(Block):
    label: str = ""
    href: str = ""


@dataclass(frozen=True)
class FindingItem(Block):
    """One finding as `core/findings/model.py`'s `Finding.as_dict` writes it."""

    id: str = ""
    severity: str = ""
    title: str = ""
    estimate: str = ""
    action: str = ""
    evidence: tuple[FindingEvidence, ...] = ()
    links: tuple[FindingLink, ...] = ()
    ms_per_step: float | None = None
    percent_of_step: float | None = None
    percent_of_device_time: float | None = None
    bytes: int | None = None
    claims: tuple[str, ...] = ()


@dataclass(frozen=True)
class FindingsBlock(Block):
    """`findings`: counts by severity and every finding, most costly first."""

    counts: dict[str, int] = field(default_factory=dict)
    items: tuple[FindingItem, ...] = ()


# ---- a run, a site ----------------------------------------------------------------------------------------------

# Each block's key, and its type (a recorded block where the run's page of that name says it came from older
# profilers' files: the block's key is shared, its keys and their order are the recorded tool's).
BLOCKS: dict[str, type[Block]] = {
    "inventory": InventoryBlock,
    "overview": OverviewBlock,
    "input_pipeline": InputPipelineBlock,
    "tf_stats": TfStatsBlock,
    "legacy_timeline": RecordedTimelineBlock,
    "kernel_stats": KernelStatsBlock,
    "op_profile": OpProfileBlock,
    "memory": MemoryBlock,
    "legacy_pod_viewer": RecordedPodViewerBlock,
    "graph_viewer": GraphViewerBlock,
    "trace": TraceBlock,
    "step_ledger": StepLedgerBlock,
    "findings": FindingsBlock,
}
RECORDED_BLOCKS: dict[str, tuple[str, type[Block]]] = {  # key: (the older capture's page, its block type)
    "overview": ("legacy_overview", RecordedOverviewBlock),
    "input_pipeline": ("legacy_input_pipeline", RecordedInputPipelineBlock),
    "op_profile": ("legacy_op_profile", RecordedOpProfileBlock),
}


@dataclass(frozen=True)
class ToolPage(Block):
    page: str = ""  # relative to the site


@dataclass(frozen=True)
class RunError(Block):
    path: str = ""
    message: str = ""


@dataclass(frozen=True)
class RunSummary:
    """A run's entry of `runs`: its hosts, errors, tool pages, and the sections' blocks in page order."""

    hosts: tuple[str, ...] = ()
    errors: tuple[RunError, ...] = ()
    tools: dict[str, ToolPage] = field(default_factory=dict)
    blocks: dict[str, Block] = field(default_factory=dict)  # by key, in the order the file holds them

    def _typed(self, key: str, kind: type | types.UnionType) -> Any:
        block = self.blocks.get(key)
        return block if isinstance(block, kind) else None

    @property
    def inventory(self) -> InventoryBlock | None:
        return self._typed("inventory", InventoryBlock)

    @property
    def overview(self) -> Overview | None:
        return self._typed("overview", Overview)

    @property
    def input_pipeline(self) -> InputPipeline | None:
        return self._typed("input_pipeline", InputPipeline)

    @property
    def tf_stats(self) -> TfStatsBlock | None:
        return self._typed("tf_stats", TfStatsBlock)

    @property
    def kernel_stats(self) -> KernelStatsBlock | None:
        return self._typed("kernel_stats", KernelStatsBlock)

    @property
    def op_profile(self) -> OpProfile | None:
        return self._typed("op_profile", OpProfile)

    @property
    def memory(self) -> MemoryBlock | None:
        return self._typed("memory", MemoryBlock)

    @property
    def graph_viewer(self) -> GraphViewerBlock | None:
        return self._typed("graph_viewer", GraphViewerBlock)

    @property
    def trace(self) -> TraceBlock | None:
        return self._typed("trace", TraceBlock)

    @property
    def step_ledger(self) -> StepLedgerBlock | None:
        return self._typed("step_ledger", StepLedgerBlock)

    @property
    def findings(self) -> FindingsBlock | None:
        return self._typed("findings", FindingsBlock)

    def with_block(self, key: str, block: Block) -> RunSummary:
        """This run with a section's block added (the memory sections each add their part of `memory`)."""
        held = self.blocks.get(key)
        if isinstance(held, MemoryBlock) and isinstance(block, MemoryBlock):
            block = held.merged(block)
        return dataclasses.replace(self, blocks={**self.blocks, key: block})

    def to_json(self) -> dict[str, Json]:
        return {"hosts": list(self.hosts), "errors": [e.to_json() for e in self.errors],
                "tools": {slug: t.to_json() for slug, t in self.tools.items()},
                **{key: block.to_json() for key, block in self.blocks.items()}}

    @classmethod
    def from_json(cls, data: Any) -> RunSummary:
        if not isinstance(data, dict):
            data = {}
        hosts = tuple(h for h in _list(data.get("hosts")) if isinstance(h, str))
        errors = tuple(RunError.from_json(e) for e in _list(data.get("errors")) if isinstance(e, dict))
        tools = _load(dict[str, ToolPage], data.get("tools"))
        blocks: dict[str, Block] = {}
        for key, value in data.items():
            kind = _block_type(key, tools if isinstance(tools, dict) else {})
            if kind is not None and isinstance(value, dict):
                blocks[key] = kind.from_json(value)
        return cls(hosts, errors, tools if isinstance(tools, dict) else {}, blocks)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _block_type(key: str, tools: dict[str, ToolPage]) -> type[Block] | None:
    recorded = RECORDED_BLOCKS.get(key)
    if recorded is not None and recorded[0] in tools:
        return recorded[1]
    return BLOCKS.get(key)


@dataclass(frozen=True)
class SiteError(Block):
    run: str = ""
    path: str = ""
    message: str = ""


@dataclass(frozen=True)
class SiteSummary:
    """summary.json: every run of the site, and what could not be read."""

    generator: str = ""  # "reportgen <version>"
    runs: dict[str, RunSummary] = field(default_factory=dict)
    hosts: int = 0  # hosts read
    errors: tuple[SiteError, ...] = ()
    schema: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Json]:
        return {"schema": self.schema, "generator": self.generator,
                "runs": {name: run.to_json() for name, run in self.runs.items()},
                "hosts": self.hosts, "errors": [e.to_json() for e in self.errors]}

    @classmethod
    def from_json(cls, data: Any) -> SiteSummary:
        if not isinstance(data, dict):
            data = {}
        runs = data.get("runs") if isinstance(data.get("runs"), dict) else {}
        schema = data.get("schema")
        return cls(generator=str(data.get("generator", "")),
                   runs={str(name): RunSummary.from_json(run) for name, run in runs.items()},
                   hosts=data["hosts"] if isinstance(data.get("hosts"), int) else 0,
                   errors=tuple(SiteError.from_json(e) for e in _list(data.get("errors")) if isinstance(e, dict)),
                   schema=schema if isinstance(schema, int) and not isinstance(schema, bool) else SCHEMA_VERSION)


def contract() -> Iterator[tuple[str, str, str]]:
    """Every block's key path, its type and when the file holds it, as docs/summary-json.md lists them:
    ("overview.steps", "int", "always"), ...; nested blocks' keys under their parent's (`[]` a list's items, `*` a
    map's values)."""

    def walk(prefix: str, cls: type) -> Iterator[tuple[str, str, str]]:
        hints = _hints(cls)
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            yield f"{prefix}{f.name}", _type_name(hint), _presence(f)
            for suffix, inner in _nested(hint):
                yield from walk(f"{prefix}{f.name}{suffix}.", inner)

    for key, cls in BLOCKS.items():
        yield from walk(f"{key}.", cls)
    for key, (page, cls) in RECORDED_BLOCKS.items():
        yield from walk(f"{key} ({page}).", cls)


def _presence(f: dataclasses.Field) -> str:
    rule = f.metadata.get("omit")
    if rule == "none":
        return "when it has a value"
    if rule == "empty":
        return "when not empty"
    if isinstance(rule, tuple):
        return f"with `{rule[1]}`"
    return "always"


def contract_markdown() -> str:
    """docs/summary-json.md: every key of every block (`scripts/summary_contract.py` writes it)."""
    lines = [
        "# summary.json, key by key",
        "",
        "Generated from `reportgen/summary_blocks.py` by `python scripts/summary_contract.py`; "
        "`tests/test_summary_blocks.py` fails when the two differ. README.md (\"Outputs and exit status\") says "
        "what the blocks mean.",
        "",
        f"Schema version: {SCHEMA_VERSION}. A site's `summary.json` holds `schema`, `generator`, `runs` (per run: "
        "`hosts`, `errors` (`path`, `message`), `tools` (per tool page: `page`) and the blocks below, each where "
        "the run has that tool), `hosts` and `errors` (`run`, `path`, `message`).",
        "",
        "A block named with a page in brackets is the same key written for a run of older profilers' files "
        "(the run has that page): its keys are the recorded tool's.",
        "",
        "`[]`: each item of a list; `*`: each value of a map (keyed by host, allocator, module, cause or tool); "
        "`object`: the keys listed under it; `any`: a value whose shape the named code owns.",
        "",
        "| key | type | written |",
        "|---|---|---|",
    ]
    lines += [f"| `{path}` | {kind} | {presence} |" for path, kind, presence in contract()]
    return "\n".join(lines) + "\n"


def _nested(hint: Any) -> Iterator[tuple[str, type]]:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(hint):
            yield from _nested(arg)
    elif origin is tuple:
        yield from ((f"[]{s}", t) for s, t in _nested(typing.get_args(hint)[0]))
    elif origin is dict:
        yield from ((f".*{s}", t) for s, t in _nested(typing.get_args(hint)[1]))
    elif isinstance(hint, type) and issubclass(hint, Block):
        yield "", hint


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if hint is Any:
        return "any"
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))  # a Markdown table cell holds no |
    if origin is tuple:
        return f"list[{_type_name(typing.get_args(hint)[0])}]"
    if origin is dict:
        return f"map[{_type_name(typing.get_args(hint)[1])}]"
    if hint is type(None):
        return "null"
    if isinstance(hint, type) and issubclass(hint, Block):
        return "object"
    return hint.__name__


__all__ = [
    "Allocator", "BLOCKS", "Block", "DeviceOp", "FindingEvidence", "FindingItem", "FindingLink", "FindingsBlock",
    "GraphModule", "GraphViewerBlock", "HostSteps", "InputBottleneck", "InputPipeline", "InputPipelineBlock",
    "InventoryBlock", "Kernel", "KernelStatsBlock", "LedgerEvent", "LedgerStep", "MemoryBlock", "OpCategory",
    "OpProfile", "OpProfileBlock", "Overview", "OverviewBlock", "OverviewOp", "ProgramMemory", "RECORDED_BLOCKS",
    "RecordedInputPipelineBlock", "RecordedOpProfileBlock", "RecordedOverviewBlock", "RecordedPodViewerBlock",
    "RecordedTimelineBlock", "RunError", "RunSummary", "SCHEMA_VERSION", "SiteError", "SiteSummary", "StepCategory",
    "StepLedgerBlock", "StepTime", "TfStatsBlock", "TfStatsOp", "ToolPage", "TraceBlock", "contract",
    "contract_markdown", "finite",
    "omitted_if_empty", "omitted_if_none", "omitted_with",
]
