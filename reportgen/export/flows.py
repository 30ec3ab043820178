"""Flow arrows between events, linked the way XProf links them when it loads a capture.

XProf (PreprocessSingleHostXSpace) gives an event a flow when:
* the capture already holds a `flow` stat on it;
and, only for a capture that is not grouped yet (no `group_id` stat anywhere):
* it has a `correlation_id` (a CUPTI launch): out on host planes, in on device
  planes, category gpu_launch;
* it is a producer (`_pt` + `_p`: out) or consumer (`_ct` + `_c`: in) — stats the
  capture holds or that XProf's connection rules set from other stats (TF
  executor → TpuExecuteOp, TPU request queues, TPU program launches and the
  device's `XLA Modules` line).
When several apply, the last in that order wins (XProf reads the last `flow`).

XProf's flow ids are process-salted hashes; ids here are a fixed 53-bit hash
of the same inputs, so they pair the same events and stay exact in JavaScript.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from reportgen.capture import KIND_INT64, KIND_UINT64, HostCapture, search_owners
from reportgen.export import schema
from reportgen.export.columns import CaptureColumns
from reportgen.export.layout import TraceLayout
from reportgen.export.stat_select import EventStats, first_per_owner

ID_MASK = np.uint64((1 << 53) - 1)
RUN_ID_MASK = np.uint64((1 << 27) - 1)
FLOW_ID_BITS = np.uint64((1 << 56) - 1)

_SALT_EXISTING = 0x51A7
_SALT_CORRELATION = 0xC022
_SALT_CONTEXT = 0xC7E8

FLOW_ASYNC = 4  # flag next to the direction bits: an async event (`_a`) with a flow

TPU_CORE_PLANE = re.compile(r"^/device:TPU:([0-9]+)$")
XLA_MODULES_LINE = "XLA Modules"


@dataclass(frozen=True)
class Connection:
    """XplaneConnectedEventMutatorFactory: producer and consumer events sharing stat values."""

    producer: str
    consumer: str
    context: int
    unique: bool  # the context id hashes the stats only (else also both event names)
    stats: tuple[str, ...]
    defaults: tuple[tuple[str, int], ...] = ()


_QUEUE_CONSUMERS = (
    "RunProgramRequest", "HostCallbackRequest", "TransferH2DRequest", "TransferPreprocessedH2DRequest",
    "TransferD2HRequest", "OnDeviceSendRequest", "OnDeviceRecvRequest", "OnDeviceSendRecvLocalRequest",
    "CustomWait", "OnDeviceSendRequestMulti", "OnDeviceRecvRequestMulti", "PjrtAsyncWait",
)
CONNECTIONS: tuple[Connection, ...] = (
    Connection("ExecutorState::Process", "TpuExecuteOp", schema.CONTEXT_LEGACY, False, ("id", "iter_num")),
    *(
        Connection("EnqueueRequestLocked", c, schema.CONTEXT_TPU_STREAM, True, ("request_id", "queue_addr"))
        for c in _QUEUE_CONSUMERS
    ),
    Connection(
        "DoEnqueueProgram", "CompleteCallbacks", schema.CONTEXT_TPU_LAUNCH, True,
        ("device_ordinal", "queue_id", "run_id", "core_type"), (("core_type", 0),),
    ),
)
# HostRunIdMutator: these events' run_id is cut to its 27 low bits first.
RUN_ID_MASKED_EVENTS = ("DoEnqueueProgram", "CompleteCallbacks", "DoEnqueueContinuationProgram")


@dataclass
class EventFlows:
    flow_id: np.ndarray  # uint64 per event, 0 = none
    flow_bits: np.ndarray  # int8 per event: direction (schema.FLOW_*) | FLOW_ASYNC
    flow_cat: np.ndarray  # int8 per event: context type

    @property
    def count(self) -> int:
        return int(np.count_nonzero(self.flow_id))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_values(*columns) -> np.ndarray:
    """Order-sensitive 64-bit hash of equally long uint64 columns (or scalars)."""
    length = max((len(c) for c in columns if isinstance(c, np.ndarray)), default=1)
    h = np.full(length, 0x2545F4914F6CDD1D, dtype=np.uint64)
    for col in columns:
        value = col.astype(np.uint64) if isinstance(col, np.ndarray) else np.full(length, col, dtype=np.uint64)
        h = _mix(h ^ _mix(value))
    return h


def _flow_id(*columns) -> np.ndarray:
    h = hash_values(*columns) & ID_MASK
    return np.where(h == 0, np.uint64(1), h)


def _name_hash(text: str) -> int:
    return int(hash_values(*np.frombuffer(text.encode(), dtype=np.uint8).astype(np.uint64))[0]) if text else 0


class _StatLookup:
    """First value of a stat per event, as IntOrUint (strings read as 0), sparse."""

    def __init__(self, capture: HostCapture, stats: EventStats):
        self.capture = capture
        self.stats = stats
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def get(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(event rows sorted, uint64 values, kinds)."""
        if name not in self._cache:
            rows = self.stats.get(name)
            owners, first = first_per_owner(rows.owner)
            kind = rows.kind[first]
            raw = rows.raw[first]
            ints = (kind == KIND_INT64) | (kind == KIND_UINT64)
            values = np.where(ints, raw, 0).view(np.uint64)
            self._cache[name] = (owners, values, kind)
        return self._cache[name]

    def values_at(self, name: str, rows: np.ndarray, default: int | None = None):
        """(present mask, values) of a stat at the given event rows."""
        owners, values, _ = self.get(name)
        pos = search_owners(owners, rows)
        pos_c = np.minimum(pos, max(len(owners) - 1, 0))
        present = (pos < len(owners)) & (owners[pos_c] == rows) if len(owners) else np.zeros(len(rows), bool)
        out = np.where(present, values[pos_c] if len(owners) else 0, 0).astype(np.uint64)
        if default is not None:
            out = np.where(present, out, np.uint64(default))
            present = np.ones(len(rows), dtype=bool)
        return present, out


class _RowsNamed:
    """Event rows by event name, for a fixed set of names: the metadata is searched once for all of
    them (a search per name cost ≈ 0.25 ms each, 29 per host, whatever the host's size)."""

    def __init__(self, columns: CaptureColumns, names: Iterable[str]):
        hits = columns.md_named(names)
        self._ids: dict[str, list[int]] = {}
        for md, name in zip(hits.tolist(), columns.md_names(hits)):
            self._ids.setdefault(name, []).append(md)
        self._md = columns.ev_md if self._ids else None

    def __call__(self, names: Iterable[str]) -> np.ndarray:
        wanted = [md for name in names for md in self._ids.get(name, ())]
        if not wanted:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.isin(self._md, wanted))


class _Endpoints:
    """Producer or consumer (context type, id) per event, last assignment wins."""

    def __init__(self):
        self.rows: list[np.ndarray] = []
        self.ctx: list[np.ndarray] = []
        self.ids: list[np.ndarray] = []

    def set(self, rows: np.ndarray, ctx, ids: np.ndarray) -> None:
        if len(rows):
            self.rows.append(rows.astype(np.int64))
            self.ctx.append(np.broadcast_to(np.asarray(ctx, dtype=np.uint64), rows.shape).copy())
            self.ids.append(ids.astype(np.uint64))

    def resolve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.rows:
            empty = np.zeros(0, np.int64)
            return empty, empty.astype(np.uint64), empty.astype(np.uint64)
        rows = np.concatenate(self.rows)
        ctx = np.concatenate(self.ctx)
        ids = np.concatenate(self.ids)
        # Keep each event's last assignment.
        order = np.argsort(rows, kind="stable")
        rows, ctx, ids = rows[order], ctx[order], ids[order]
        last = np.append(rows[1:] != rows[:-1], True)
        return rows[last], ctx[last], ids[last]


def _raw_endpoints(stats: _StatLookup, type_name: str, id_name: str, out: _Endpoints) -> None:
    owners, _, _ = stats.get(type_name)
    if len(owners) == 0:  # no event carries the type: no endpoint to look up
        return
    present, ids = stats.values_at(id_name, owners)
    _, types = stats.values_at(type_name, owners[present])
    out.set(owners[present], types, ids[present])


def _connection_endpoints(columns: CaptureColumns, stats: _StatLookup, producers: _Endpoints,
                          consumers: _Endpoints) -> None:
    endpoints = [name for rule in CONNECTIONS for name in (rule.producer, rule.consumer)]
    rows_named = _RowsNamed(columns, [*RUN_ID_MASKED_EVENTS, *endpoints])
    masked = rows_named(RUN_ID_MASKED_EVENTS)
    for rule in CONNECTIONS:
        defaults = dict(rule.defaults)
        for event_name, side in ((rule.producer, producers), (rule.consumer, consumers)):
            rows = rows_named([event_name])
            if len(rows) == 0:
                continue
            keep = np.ones(len(rows), dtype=bool)
            values = []
            for stat in rule.stats:
                present, vals = stats.values_at(stat, rows, defaults.get(stat))
                if stat == "run_id":
                    vals = np.where(np.isin(rows, masked), vals & RUN_ID_MASK, vals)
                keep &= present
                values.append(vals)
            values = [v[keep] for v in values]
            if rule.unique:
                context_id = hash_values(*values)
            else:
                context_id = hash_values(_name_hash(rule.producer), _name_hash(rule.consumer), *values)
            side.set(rows[keep], rule.context, context_id)


def _module_line_endpoints(columns: CaptureColumns, stats: _StatLookup, consumers: _Endpoints) -> None:
    """TpuModuleLineMutator: `XLA Modules` events of a TPU core consume their program launch."""
    module_lines = None
    for plane_row, plane_name in enumerate(columns.plane_name):
        match = TPU_CORE_PLANE.match(plane_name)
        if not match:
            continue
        ordinal = int(match.group(1))
        if module_lines is None:
            module_lines = np.array([name == XLA_MODULES_LINE for name in columns.line_name], dtype=bool)
        for line in np.flatnonzero((columns.line_plane == plane_row) & module_lines):
            first = int(columns.line_first[line])
            rows = np.arange(first, first + int(columns.line_count[line]), dtype=np.int64)
            has_run, run_id = stats.values_at("run_id", rows)
            has_queue, queue_id = stats.values_at("queue_id", rows)
            _, core_type = stats.values_at("core_type", rows, 0)
            keep = has_run & has_queue
            context_id = hash_values(np.uint64(ordinal), queue_id[keep], run_id[keep], core_type[keep])
            consumers.set(rows[keep], schema.CONTEXT_TPU_LAUNCH, context_id)


def is_grouped(capture: HostCapture) -> bool:
    """XProf's IsXSpaceGrouped: a `group_id` stat exists on some plane."""
    if capture.string_id(schema.STAT_GROUP_ID) < 0:  # stat names are interned: no such stat anywhere
        return False
    return bool((capture.stat_metadata["name"] == schema.STAT_GROUP_ID).any())


def _safe_context(ctx: np.ndarray) -> np.ndarray:
    return np.where(ctx > np.uint64(schema.LAST_CONTEXT_TYPE), np.uint64(schema.CONTEXT_GENERIC), ctx)


def event_flows(capture: HostCapture, layout: TraceLayout, event_stats: EventStats | None = None,
                columns: CaptureColumns | None = None) -> EventFlows:
    columns = CaptureColumns(capture) if columns is None else columns
    n = capture.event_count
    flow_id = np.zeros(n, dtype=np.uint64)
    flow_bits = np.zeros(n, dtype=np.int8)
    flow_cat = np.zeros(n, dtype=np.int8)
    stats = _StatLookup(capture, EventStats(capture) if event_stats is None else event_stats)

    def assign(rows: np.ndarray, ids: np.ndarray, direction, ctx) -> None:
        flow_id[rows] = ids
        flow_bits[rows] = np.asarray(direction, dtype=np.int8)
        flow_cat[rows] = np.asarray(ctx).astype(np.int8)

    owners, values, kind = stats.get(schema.STAT_FLOW)
    if len(owners):
        raw = np.where((kind == KIND_INT64) | (kind == KIND_UINT64), values, np.uint64(0))
        direction = (raw & np.uint64(3)).astype(np.int8)
        keep = direction != 0
        ids = (raw >> np.uint64(2)) & FLOW_ID_BITS
        ctx = _safe_context(raw >> np.uint64(58))
        assign(owners[keep], _flow_id(_SALT_EXISTING, ids[keep]), direction[keep], ctx[keep])

    if not is_grouped(capture):
        corr_rows, corr, corr_kind = stats.get(schema.STAT_CORRELATION_ID)
        if len(corr_rows):
            # XProf reads the uint64 field only: a correlation id stored otherwise reads as 0.
            corr = np.where(corr_kind == KIND_UINT64, corr, np.uint64(0))
            plane = columns.plane_of(corr_rows)
            direction = np.where(layout.plane_is_host[plane], schema.FLOW_OUT, schema.FLOW_IN)
            assign(corr_rows, _flow_id(_SALT_CORRELATION, corr), direction, schema.CONTEXT_GPU_LAUNCH)

        producers, consumers = _Endpoints(), _Endpoints()
        _raw_endpoints(stats, schema.STAT_PRODUCER_TYPE, schema.STAT_PRODUCER_ID, producers)
        _raw_endpoints(stats, schema.STAT_CONSUMER_TYPE, schema.STAT_CONSUMER_ID, consumers)
        _connection_endpoints(columns, stats, producers, consumers)
        _module_line_endpoints(columns, stats, consumers)
        for side, direction in ((producers, schema.FLOW_OUT), (consumers, schema.FLOW_IN)):
            if not side.rows:  # no endpoint on this side: nothing to assign
                continue
            rows, ctx, ids = side.resolve()
            ctx = _safe_context(ctx)
            assign(rows, _flow_id(_SALT_CONTEXT, ctx, ids), direction, ctx)

    async_rows, _, _ = stats.get(schema.STAT_IS_ASYNC)
    if len(async_rows):
        with_flow = async_rows[flow_id[async_rows] != 0]
        flow_bits[with_flow] |= FLOW_ASYNC
    return EventFlows(flow_id=flow_id, flow_bits=flow_bits, flow_cat=flow_cat)
