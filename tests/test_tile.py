"""bench/tile.py: N time-shifted copies, each a distinct set of steps."""

from __future__ import annotations

from bench.tile import tile
from reportgen.loaders.proto import xplane_pb2
from tests.conftest import LOGDIR, REPO, needs_shared

SAMPLE = REPO / "reportgen" / "sample" / "plugins" / "profile" / "tf_keras_fast" / "vm.xplane.pb"
GPU = LOGDIR / "plugins" / "profile" / "gpu_multi_worker" / "34.83.195.179_6003.xplane.pb"
GAP = 10**9


def _stat_ids(plane, name: str) -> set[int]:
    return {k for k, m in plane.stat_metadata.items() if m.name == name}


def _stat_values(event, ids: set[int]) -> list[int]:
    return [st.int64_value or st.uint64_value for st in event.stats if st.metadata_id in ids]


def _values(space, name: str, copies: int) -> list[set[int]]:
    """Values of stat `name` per copy (copies are the equal slices of each line)."""
    per_copy: list[set[int]] = [set() for _ in range(copies)]
    for plane in space.planes:
        ids = _stat_ids(plane, name)
        for line in plane.lines:
            n = len(line.events) // copies
            for k in range(copies):
                for event in line.events[k * n : (k + 1) * n]:
                    per_copy[k].update(_stat_values(event, ids))
    return per_copy


def _span(space) -> tuple[int, int]:
    starts, ends = [], []
    for plane in space.planes:
        for line in plane.lines:
            for e in line.events:
                starts.append(line.timestamp_ns * 1000 + e.offset_ps)
                ends.append(starts[-1] + e.duration_ps)
    return min(starts), max(ends)


def test_copies_are_shifted_in_time_and_renumbered():
    original = xplane_pb2.XSpace.FromString(SAMPLE.read_bytes())
    tiled = xplane_pb2.XSpace.FromString(tile(SAMPLE.read_bytes(), 3, GAP))
    first, last = _span(original)
    period = last - first + GAP
    assert [p.name for p in tiled.planes] == [p.name for p in original.planes]
    for plane, source in zip(tiled.planes, original.planes):
        assert dict(plane.event_metadata) == dict(source.event_metadata)  # no Steps line here
        assert dict(plane.stat_metadata) == dict(source.stat_metadata)
        assert list(plane.stats) == list(source.stats) or plane.name == "Task Environment"
        for line, src in zip(plane.lines, source.lines):
            n = len(src.events)
            assert len(line.events) == 3 * n
            for k in range(3):
                copy = line.events[k * n : (k + 1) * n]
                assert [e.offset_ps for e in copy] == [e.offset_ps + k * period for e in src.events]
                assert [(e.metadata_id, e.duration_ps) for e in copy] == [
                    (e.metadata_id, e.duration_ps) for e in src.events]
            starts = [e.offset_ps for e in line.events]
            assert starts == sorted(starts)
    steps = _values(tiled, "step_num", 3)
    width = max(steps[0]) - min(steps[0]) + 1
    assert steps[1] == {s + width for s in steps[0]} and steps[2] == {s + 2 * width for s in steps[0]}
    assert _values(tiled, "_r", 3)[2] == _values(original, "_r", 1)[0]  # roots stay roots
    producers = _values(tiled, "_p", 3)
    assert not producers[0] & producers[1] and not producers[1] & producers[2]
    env = next(p for p in tiled.planes if p.name == "Task Environment")
    names = {k: m.name for k, m in env.stat_metadata.items()}
    times = {names[s.metadata_id]: s.uint64_value for s in env.stats if s.WhichOneof("value") == "uint64_value"}
    src_env = next(p for p in original.planes if p.name == "Task Environment")
    src_times = {names[s.metadata_id]: s.uint64_value for s in src_env.stats
                 if s.WhichOneof("value") == "uint64_value"}
    assert times["profile_stop_time"] == src_times["profile_stop_time"] + 2 * period // 1000


def test_one_copy_is_the_original():
    data = SAMPLE.read_bytes()
    assert xplane_pb2.XSpace.FromString(tile(data, 1, GAP)) == xplane_pb2.XSpace.FromString(data)


@needs_shared
def test_gpu_steps_and_launch_ids_are_distinct_per_copy():
    tiled = xplane_pb2.XSpace.FromString(tile(GPU.read_bytes(), 2, GAP))
    groups = _values(tiled, "group_id", 2)
    assert groups[0] and not groups[0] & groups[1]
    correlations = _values(tiled, "correlation_id", 2)
    assert not correlations[0] & correlations[1]
    host = next(p for p in tiled.planes if p.name == "/host:CPU")
    host_correlation = _stat_ids(host, "correlation_id")
    host_ids = {v for line in host.lines for e in line.events[len(line.events) // 2:]
                for v in _stat_values(e, host_correlation)}
    for plane in tiled.planes:
        if not plane.name.startswith("/device:GPU:") or not plane.lines:
            continue
        # Kernels of copy 1 still find their launches of copy 1 on the host.
        correlation = _stat_ids(plane, "correlation_id")
        device_ids = {v for line in plane.lines for e in line.events[len(line.events) // 2:]
                      for v in _stat_values(e, correlation)}
        assert device_ids and device_ids <= host_ids
        steps = next((line for line in plane.lines if line.name == "Steps"), None)
        if steps is None:
            continue
        for k, event in enumerate(steps.events):
            group = _stat_values(event, _stat_ids(plane, "group_id"))[0]
            name = plane.event_metadata[event.metadata_id].name
            step_names = [st.str_value for st in event.stats
                          if plane.stat_metadata[st.metadata_id].name == "step_name"]
            assert name == str(group) and step_names == [str(group)]
            assert group in groups[k]
