"""Structure-aware fuzzing of XSpace captures: real captures' fields changed through protobuf.

A case is a seed capture (a real one cut to a few events per line, or one built in code) and a few
mutations drawn from a seeded random generator: ids pointed elsewhere, missing or huge; timestamps,
offsets and durations negative, huge or zero; stat values of another kind (NaN, infinities, the
integer limits, odd strings and bytes); names swapped for names the analyses look for (so step,
device, tf.data and XLA code runs on odd values); lines, events, metadata and planes deleted or
duplicated. The case is run through the host stage (`process_host`); `tests/test_fuzz.py` runs a few
hundred in the suite, `bench/fuzz.py` as many as asked.

A case passes when the host builds, or fails with an input error that names the file (never "internal
error"), and the process neither crashes nor prints a traceback.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reportgen.loaders.proto import xplane_pb2 as pb

EVENTS_PER_LINE = 24  # seeds are cut to this many events per line: a case runs in tens of milliseconds

INT64_MIN, INT64_MAX, UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
ODD_INTS = [0, 1, -1, 2, INT64_MIN, INT64_MAX, INT64_MAX // 1000 + 1, 1 << 53, (1 << 53) + 1, 1 << 62, -(1 << 62),
            1 << 31, -(1 << 31), 10**12]
ODD_UINTS = [0, 1, UINT64_MAX, 1 << 63, (1 << 63) + 1, 1 << 53]
ODD_DOUBLES = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e-300, 2.5, -1.0, 1e19]
ODD_STRINGS = ["", " ", "0", "-1", "nan", "1e999", "\x00", "é", "🙂", "a" * 5000, "</script><script>1</script>",
               "=cmd|' /C calc'!A0", "@SUM(1)", "regs:4 static_shared:0 dynamic_shared:0 grid:0,0,0 block:0,0,0",
               "%", "::", "/", "a:b:c", "fusion.1", "jit_f(1)", "step_1", "1", "18446744073709551615"]
PLANE_NAMES = ["/host:CPU", "/device:GPU:0", "/device:GPU:1", "/device:TPU:0", "/device:TPU:1", "/host:metadata",
               "Task Environment", "/device:TPU:0 SparseCore 0", "/device:CUSTOM:0", "/device:GPU:0 aggregated", "",
               "/device:GPU:x"]
LINE_NAMES = ["Steps", "XLA Ops", "XLA Modules", "TensorFlow Ops", "TensorFlow Name Scope", "Framework Ops",
              "Stream #1(Compute)", "Stream #2(MemcpyH2D)", "python3", "tf_Compute", "Launch Activity",
              "XLA TraceMe", "Sparse Core Ops", "Source code", "", "Async XLA Ops"]
EVENT_NAMES = ["train", "IteratorGetNext", "Iterator::Prefetch", "Iterator::Model::Map", "SessionRun",
               "EagerExecute", "EagerKernelExecute", "ExecutorState::Process", "MemoryAllocation",
               "MemoryDeallocation", "$core", "Iterator::Prefetch::Generator", "FunctionRun", "TraceContext",
               "ProcessBatch", "cuLaunchKernel", "cudaMemcpyAsync", "InfeedEnqueueTuple", "fusion.1", "copy.2",
               "jit_f(7)", "while", "1", "0", "", "__inference_train_function_123", "MatMul:MatMul",
               "ThreadpoolListener::Region"]


@dataclass
class Seed:
    name: str
    data: bytes  # a serialized XSpace


@dataclass
class Case:
    seed: str
    number: int
    mutations: list[str]
    data: bytes


def cut(data: bytes, events_per_line: int = EVENTS_PER_LINE) -> bytes:
    """A real capture cut to its first events per line (its metadata kept whole)."""
    space = pb.XSpace.FromString(data)
    for plane in space.planes:
        for line in plane.lines:
            del line.events[events_per_line:]
    return space.SerializeToString()


def builder_seeds() -> list[Seed]:
    """Seeds made in code: a GPU capture with kernels and steps, a TPU capture with XLA ops."""
    from tests.test_device_tools_pages import tpu_space
    from tests.xspace import Ref, gpu_space

    space = gpu_space()
    host = space.host_plane()
    launch = host.line(2, "tf_Compute")
    gpu = space.gpu(0)
    stream = gpu.line(7, "Stream #7(Compute)")
    for i in range(6):
        launch.event("cuLaunchKernel", 1000 * i, 200, correlation_id=i, group_id=i // 3)
        stream.event("volta_sgemm", 1000 * i + 300, 500, correlation_id=i, group_id=i // 3,
                     kernel_details=Ref("regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:32,1,1"),
                     tf_op="model/dense/MatMul:MatMul")
    steps = host.line(3, "python3")
    for i in range(2):
        steps.event("train", 3000 * i, 2900, step_num=i, _r=1, group_id=i)
    return [Seed("builder_gpu", space.serialize()), Seed("builder_tpu", tpu_space().serialize())]


def seeds(extra: list[Path] = ()) -> list[Seed]:
    """The bundled sample's captures (cut), the builder's, and any `extra` capture files (cut)."""
    sample = Path(__file__).resolve().parent.parent / "reportgen" / "sample" / "plugins" / "profile"
    files = sorted(sample.glob("*/*.xplane.pb")) + list(extra)
    found = [Seed(f"{p.parent.name}/{p.name}", cut(p.read_bytes())) for p in files]
    return found + builder_seeds()


class Mutator:
    """Draws and applies mutations to one XSpace."""

    def __init__(self, rng: random.Random, space: pb.XSpace):
        self.rng = rng
        self.space = space
        self.stat_names = sorted({md.name for p in space.planes for md in p.stat_metadata.values()}) or ["x"]
        self.event_names = sorted({md.name for p in space.planes for md in p.event_metadata.values()})

    # --- picking things ----------------------------------------------------------
    def plane(self) -> pb.XPlane | None:
        return self.rng.choice(self.space.planes) if self.space.planes else None

    def line(self) -> pb.XLine | None:
        lines = [line for p in self.space.planes for line in p.lines]
        return self.rng.choice(lines) if lines else None

    def event(self) -> tuple[pb.XPlane, pb.XEvent] | None:
        found = [(p, e) for p in self.space.planes for line in p.lines for e in line.events]
        return self.rng.choice(found) if found else None

    def stat(self) -> tuple[pb.XPlane, pb.XStat] | None:
        found = [(p, s) for p in self.space.planes for line in p.lines for e in line.events for s in e.stats]
        found += [(p, s) for p in self.space.planes for md in p.event_metadata.values() for s in md.stats]
        found += [(p, s) for p in self.space.planes for s in p.stats]
        return self.rng.choice(found) if found else None

    def odd_int(self) -> int:
        return self.rng.choice(ODD_INTS) if self.rng.random() < 0.7 else self.rng.randrange(-10**6, 10**6)

    def name(self) -> str:
        pool = self.event_names + EVENT_NAMES + ODD_STRINGS
        return self.rng.choice(pool)

    # --- mutations: each returns a description, or None when it found nothing to change
    def event_metadata_id(self) -> str | None:
        found = self.event()
        if not found:
            return None
        plane, event = found
        ids = list(plane.event_metadata) or [0]
        event.metadata_id = self.rng.choice(ids) if self.rng.random() < 0.5 else self.odd_int()
        return f"event metadata_id={event.metadata_id}"

    def event_time(self) -> str | None:
        found = self.event()
        if not found:
            return None
        _, event = found
        which = self.rng.choice(["offset_ps", "duration_ps", "num_occurrences"])
        setattr(event, which, self.odd_int())
        return f"event {which}={getattr(event, which)}"

    def line_field(self) -> str | None:
        line = self.line()
        if line is None:
            return None
        which = self.rng.choice(["timestamp_ns", "duration_ps", "id", "display_id", "name", "display_name"])
        if which in ("name", "display_name"):
            setattr(line, which, self.rng.choice(LINE_NAMES + ODD_STRINGS))
        else:
            setattr(line, which, self.odd_int())
        return f"line {which}={getattr(line, which)!r:.60}"

    def stat_value(self) -> str | None:
        found = self.stat()
        if not found:
            return None
        plane, stat = found
        kind = self.rng.choice(["double_value", "uint64_value", "int64_value", "str_value", "bytes_value", "ref_value",
                                "metadata_id", "clear"])
        if kind == "double_value":
            stat.double_value = self.rng.choice(ODD_DOUBLES)
        elif kind == "uint64_value":
            stat.uint64_value = self.rng.choice(ODD_UINTS)
        elif kind == "int64_value":
            stat.int64_value = self.rng.choice(ODD_INTS)
        elif kind == "str_value":
            stat.str_value = self.rng.choice(ODD_STRINGS + self.event_names)
        elif kind == "bytes_value":
            stat.bytes_value = self.rng.randbytes(self.rng.choice([0, 1, 3, 16, 200]))
        elif kind == "ref_value":
            ids = list(plane.stat_metadata) or [0]
            stat.ref_value = self.rng.choice(ids) if self.rng.random() < 0.6 else self.rng.choice(ODD_UINTS)
        elif kind == "metadata_id":
            ids = list(plane.stat_metadata) or [0]
            stat.metadata_id = self.rng.choice(ids) if self.rng.random() < 0.7 else self.odd_int()
        else:
            stat.ClearField("value")
        return f"stat {kind}"

    def add_stat(self) -> str | None:
        """A stat the analyses look for, with an odd value, on an event or a metadata."""
        found = self.event()
        if not found:
            return None
        plane, event = found
        name = self.rng.choice(self.stat_names + ["step_num", "group_id", "correlation_id", "_r", "_p", "_c", "_pt",
                                                  "_ct", "iter_num", "flops", "bytes_accessed", "program_id",
                                                  "symbol_id", "hlo_op", "hlo_module", "kernel_details", "tf_op",
                                                  "long_name", "core_details", "memory_access_breakdown",
                                                  "peak_teraflops_per_second", "step_name", "_a", "parent_id",
                                                  "element_id", "device_offset_ps", "device_duration_ps"])
        ids = [k for k, md in plane.stat_metadata.items() if md.name == name]
        sid = ids[0] if ids else max(list(plane.stat_metadata) + [0]) + 1
        plane.stat_metadata[sid].id = sid
        plane.stat_metadata[sid].name = name
        target = event if self.rng.random() < 0.7 or event.metadata_id not in plane.event_metadata else (
            plane.event_metadata[event.metadata_id])
        stat = target.stats.add(metadata_id=sid)
        value = self.rng.choice(["int", "uint", "double", "str", "bytes"])
        if value == "int":
            stat.int64_value = self.odd_int()
        elif value == "uint":
            stat.uint64_value = self.rng.choice(ODD_UINTS)
        elif value == "double":
            stat.double_value = self.rng.choice(ODD_DOUBLES)
        elif value == "str":
            stat.str_value = self.rng.choice(ODD_STRINGS)
        else:
            stat.bytes_value = self.rng.randbytes(self.rng.choice([0, 2, 9, 40]))
        return f"add stat {name}={value}"

    def rename(self) -> str | None:
        what = self.rng.choice(["plane", "event_metadata", "stat_metadata", "display_name"])
        plane = self.plane()
        if plane is None:
            return None
        if what == "plane":
            plane.name = self.rng.choice(PLANE_NAMES + ODD_STRINGS[:6])
            return f"plane name={plane.name!r:.60}"
        if what == "stat_metadata":
            if not plane.stat_metadata:
                return None
            md = plane.stat_metadata[self.rng.choice(list(plane.stat_metadata))]
            md.name = self.rng.choice(self.stat_names + ODD_STRINGS)
            return f"stat metadata name={md.name!r:.60}"
        if not plane.event_metadata:
            return None
        md = plane.event_metadata[self.rng.choice(list(plane.event_metadata))]
        if what == "display_name":
            md.display_name = self.name()
        else:
            md.name = self.name()
        return f"event metadata {what}={(md.display_name if what == 'display_name' else md.name)!r:.60}"

    def delete(self) -> str | None:
        what = self.rng.choice(["line", "events", "event_metadata", "stat_metadata", "plane", "plane_stats"])
        plane = self.plane()
        if plane is None:
            return None
        if what == "plane":
            self.space.planes.remove(plane)
        elif what == "line" and plane.lines:
            del plane.lines[self.rng.randrange(len(plane.lines))]
        elif what == "events" and plane.lines:
            line = self.rng.choice(plane.lines)
            start = self.rng.randrange(len(line.events) + 1)
            del line.events[start:start + self.rng.choice([1, 3, 1000])]
        elif what == "event_metadata" and plane.event_metadata:
            del plane.event_metadata[self.rng.choice(list(plane.event_metadata))]
        elif what == "stat_metadata" and plane.stat_metadata:
            del plane.stat_metadata[self.rng.choice(list(plane.stat_metadata))]
        elif what == "plane_stats":
            del plane.stats[:]
        else:
            return None
        return f"delete {what}"

    def duplicate(self) -> str | None:
        what = self.rng.choice(["event", "line", "plane"])
        if what == "plane" and self.space.planes:
            plane = self.plane()
            self.space.planes.add().CopyFrom(plane)
        elif what == "line":
            plane = self.plane()
            if plane is None or not plane.lines:
                return None
            plane.lines.add().CopyFrom(self.rng.choice(plane.lines))
        else:
            line = self.line()
            if line is None or not line.events:
                return None
            line.events.add().CopyFrom(self.rng.choice(line.events))
        return f"duplicate {what}"

    def child_ids(self) -> str | None:
        plane = self.plane()
        if plane is None or not plane.event_metadata:
            return None
        md = plane.event_metadata[self.rng.choice(list(plane.event_metadata))]
        choices = list(plane.event_metadata) + [md.id, 0, -1, INT64_MAX]
        md.child_id.extend(self.rng.choice(choices) for _ in range(self.rng.choice([1, 2, 5])))
        return "event metadata child_id"

    def hostnames(self) -> str | None:
        del self.space.hostnames[:]
        if self.rng.random() < 0.5:
            self.space.hostnames.extend(self.rng.choice(ODD_STRINGS) for _ in range(self.rng.choice([1, 2])))
        return "hostnames"

    def hlo(self) -> str | None:
        """One change to an HLO module of `/host:metadata` (the builder's sample module is added where the capture
        has none): shapes, layouts, links between instructions, computations and buffers, sizes, instruction
        counts. The module is parsed and written back through protobuf, so each case is a valid HloProto."""
        from reportgen.loaders.proto import hlo_pb2
        from tests.hlo_builder import sample_module

        found = [st for p in self.space.planes if p.name == "/host:metadata" for md in p.event_metadata.values()
                 for st in md.stats if p.stat_metadata[st.metadata_id].name in ("Hlo Proto", "HLO Proto")]
        if not found:
            plane = next((p for p in self.space.planes if p.name == "/host:metadata"), None)
            if plane is None:
                plane = self.space.planes.add(id=max([p.id for p in self.space.planes] + [0]) + 1,
                                              name="/host:metadata")
            sid = max(list(plane.stat_metadata) + [0]) + 1
            plane.stat_metadata[sid].id, plane.stat_metadata[sid].name = sid, "Hlo Proto"
            mid = max(list(plane.event_metadata) + [0]) + 1
            md = plane.event_metadata[mid]
            md.id, md.name = mid, "jit_sample(7)"
            found = [md.stats.add(metadata_id=sid, bytes_value=sample_module().SerializeToString())]
        stat = self.rng.choice(found)
        try:
            proto = hlo_pb2.HloProto.FromString(stat.bytes_value)
        except Exception:  # noqa: BLE001 - an earlier mutation made it bytes protobuf refuses: leave it
            return None
        module = proto.hlo_module
        instructions = [i for c in module.computations for i in c.instructions]
        ids = [i.id for i in instructions] or [0]
        what = self.rng.choice(["dims", "layout", "operands", "calls", "root", "share", "buffer", "size",
                                "many", "entry", "tuple"])
        odd_dims = [0, -1, 1, 7, 1 << 31, 1 << 62, INT64_MAX, -(1 << 62)]
        if what in ("dims", "layout", "tuple") and instructions:
            shape = self.rng.choice(instructions).shape
            if what == "dims":
                del shape.dimensions[:]
                shape.dimensions.extend(self.rng.choice(odd_dims) for _ in range(self.rng.choice([0, 1, 2, 3, 9])))
            elif what == "layout":
                del shape.layout.minor_to_major[:]
                shape.layout.minor_to_major.extend(self.rng.choice([0, 1, 7, -1, 1 << 40])
                                                   for _ in range(self.rng.choice([1, 2, 5])))
            else:  # a tuple nested deep, or holding itself by copy
                inner = shape
                for _ in range(self.rng.choice([2, 50, 500])):
                    inner.element_type = hlo_pb2.TUPLE
                    inner = inner.tuple_shapes.add()
                inner.element_type = hlo_pb2.F32
        elif what in ("operands", "calls") and instructions:
            target = self.rng.choice(instructions)
            field = target.operand_ids if what == "operands" else target.called_computation_ids
            choices = ids + [target.id, 0, -1, INT64_MAX] + [c.id for c in module.computations]
            field.extend(self.rng.choice(choices) for _ in range(self.rng.choice([1, 2, 4])))
        elif what == "root" and module.computations:
            self.rng.choice(module.computations).root_id = self.rng.choice(ids + [0, -1, INT64_MAX])
        elif what == "share" and proto.buffer_assignment.heap_simulator_traces:
            trace = self.rng.choice(proto.buffer_assignment.heap_simulator_traces)
            buffers = [b.id for b in proto.buffer_assignment.logical_buffers] or [0]
            event = trace.events.add(kind=self.rng.choice([0, 1, 2]), buffer_id=self.rng.choice(buffers + [-1, 10**9]))
            event.share_with_canonical_id = self.rng.choice(buffers + [event.buffer_id, -1])
            event.instruction_name = self.rng.choice([i.name for i in instructions] + ["", "missing"])
        elif what == "buffer" and proto.buffer_assignment.logical_buffers:
            buffer = self.rng.choice(proto.buffer_assignment.logical_buffers)
            buffer.defined_at.instruction_id = self.rng.choice(ids + [0, -1, INT64_MAX])
            index = [self.rng.choice([0, 1, 99, -1]) for _ in range(self.rng.choice([1, 3]))]
            buffer.defined_at.shape_index.extend(index)
        elif what == "size":
            sized = list(proto.buffer_assignment.logical_buffers) + list(proto.buffer_assignment.buffer_allocations)
            if not sized:
                return None
            self.rng.choice(sized).size = self.rng.choice([0, -1, 1 << 62, INT64_MAX, -(1 << 62)])
        elif what == "many" and module.computations:
            comp = self.rng.choice(module.computations)
            if not comp.instructions:
                return None
            template = self.rng.choice(comp.instructions)
            top = max(ids)
            for k in range(self.rng.choice([100, 2000])):
                copy = comp.instructions.add()
                copy.CopyFrom(template)
                copy.id, copy.name = top + 1 + k, f"{template.name}.copy{k}"
                del copy.operand_ids[:]
                copy.operand_ids.append(top + k if k else template.id)
        elif what == "entry":
            module.entry_computation_name = self.rng.choice(["", "missing"] + [c.name for c in module.computations])
            module.entry_computation_id = self.rng.choice([0, -1] + [c.id for c in module.computations])
        else:
            return None
        stat.bytes_value = proto.SerializeToString()
        return f"hlo {what}"

    def all(self) -> list[Callable[[], str | None]]:
        return [self.event_metadata_id, self.event_time, self.line_field, self.stat_value, self.add_stat,
                self.rename, self.delete, self.duplicate, self.child_ids, self.hostnames, self.hlo]


def make_case(seed: Seed, number: int, base_seed: int) -> Case:
    """Case `number` of a seed: deterministic for (seed name, number, base seed)."""
    rng = random.Random(f"{base_seed}:{seed.name}:{number}")
    space = pb.XSpace.FromString(seed.data)
    mutator = Mutator(rng, space)
    done = []
    for _ in range(rng.choice([1, 1, 2, 3, 5])):
        described = rng.choice(mutator.all())()
        if described:
            done.append(described)
    return Case(seed.name, number, done, space.SerializeToString())


@dataclass
class Result:
    case: Case
    outcome: str  # "built", "input error" or "internal error"
    message: str | None


def run_case(case: Case, trace_format: str = "json") -> Result:
    """The case through the host stage, as `<host>.xplane.pb` of a run."""
    from reportgen.loaders.logdir import HostFile
    from reportgen.pipeline.host_stage import HostTask, process_host

    with tempfile.TemporaryDirectory(prefix="reportgen-fuzz-") as folder:
        path = Path(folder) / "fuzz.xplane.pb"
        path.write_bytes(case.data)
        task = HostTask(0, "run", HostFile(host="fuzz", path=str(path), size=len(case.data)),
                        trace_format=trace_format, memory_budget=2 << 30)
        out = Path(folder) / "out"
        out.mkdir()
        outcome = process_host(task, str(out))
    if outcome.error is None:
        return Result(case, "built", None)
    kind = "internal error" if "internal error" in outcome.error else "input error"
    return Result(case, kind, outcome.error)


def run_build(case: Case) -> Result:
    """The case through a whole build (combine and render too). When its one host fails, the build has
    nothing to show and says so (`NoCapturesError`, naming the host's problem): that is the case's outcome."""
    from reportgen.errors import NoCapturesError
    from reportgen.pipeline.build import BuildOptions, build_site

    with tempfile.TemporaryDirectory(prefix="reportgen-fuzz-") as folder:
        run = Path(folder) / "logs" / "plugins" / "profile" / "run"
        run.mkdir(parents=True)
        (run / "fuzz.xplane.pb").write_bytes(case.data)
        try:
            report = build_site([str(Path(folder) / "logs")], BuildOptions(
                output=str(Path(folder) / "site"), jobs=1, cache=False, max_memory=2 << 30))
        except NoCapturesError as exc:
            message = str(exc)
            return Result(case, "internal error" if "internal error" in message else "input error", message)
    errors = [e["message"] for e in report.errors]
    if not errors:
        return Result(case, "built", None)
    kind = "internal error" if any("internal error" in e for e in errors) else "input error"
    return Result(case, kind, "; ".join(errors))


def worker(base_seed: int, start: int, stop: int, build_every: int, extra: list[Path]) -> None:
    """Run cases start..stop-1 (case i uses seed i mod the number of seeds), one JSON line per case on
    stdout, each preceded by a `start` line: a case that crashes the process is the last one started."""
    import json
    import sys

    found = seeds(extra)
    for number in range(start, stop):
        seed = found[number % len(found)]
        print(json.dumps({"start": number}), flush=True)
        case = make_case(seed, number, base_seed)
        whole = build_every > 0 and number % build_every == 0
        result = run_build(case) if whole else run_case(case)
        print(json.dumps({"case": number, "seed": seed.name, "build": whole, "outcome": result.outcome,
                          "message": result.message, "mutations": case.mutations}), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    import sys

    _, command, base, first, last, every, *files = sys.argv
    assert command == "worker"
    worker(int(base), int(first), int(last), int(every), [Path(f) for f in files])
