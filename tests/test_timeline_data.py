"""The in-page timeline's files: every chunk event once, in XProf's tracks, nested, with its own JSON object.

The files are read back the way the page reads them (tests/timeline_files.py) and compared with the
chunk files of the same export, which the trace tests hold against XProf.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pytest

from reportgen.export import timeline
from reportgen.export.host_export import export_host
from tests.chrome_json import read_chunk, track_names
from tests.conftest import REPO, needs_shared
from tests.decoded import decoded_hosts
from tests.timeline_files import read_columns, read_index, read_script
from tests.xspace import Space

NS = 1000  # ps


def _chunk_events(result, folder: Path) -> tuple[list[dict], dict, dict]:
    events, processes, threads = [], {}, {}
    for rec in result.chunks:
        doc = read_chunk(folder.parent / rec.file)
        p, t = track_names(doc)
        processes.update(p)
        threads.update(t)
        events.extend(e for e in doc["traceEvents"] if e.get("ph") not in ("M", "C"))
    return events, processes, threads


def _timeline_rows(folder: Path) -> tuple[dict, list[tuple[dict, object, int, dict]]]:
    """(index, [(window, columns, row, the row's JSON object)]) for every row not carried in from an earlier window."""
    index = read_index(folder)
    rows = []
    for window in index["windows"]:
        header, cols = read_columns(folder / f"{window['key']}.js")
        _, objects = read_script(folder / f"{window['args']}.js")
        objects = orjson.loads(objects)
        assert len(objects) == header["n"] == len(cols.start)
        carried = set(cols.carried)
        assert window["events"] == header["n"] - len(carried)
        for r in range(header["n"]):
            if r not in carried:
                rows.append((window, cols, r, objects[r]))
    return index, rows


def _check_against_chunks(result, folder: Path) -> dict:
    tl_folder = folder / timeline.DIR
    chunk_events, processes, threads = _chunk_events(result, folder)
    index, rows = _timeline_rows(tl_folder)
    assert index["events"] == len(rows) == result.timeline.events
    objects = Counter(orjson.dumps(obj) for _, _, _, obj in rows)
    chunk = Counter(orjson.dumps(e) for e in chunk_events)
    # Every drawn event is a chunk event; the chunk events left are the ends the JSON writer adds
    # to in-out async events (one per such event), never drawn on their own.
    assert not objects - chunk
    left = chunk - objects
    assert all(orjson.loads(k)["ph"] == "e" for k in left)
    assert sum(left.values()) == sum(1 for _, _, _, o in rows if o["ph"] == "b")
    for _window, cols, r, obj in rows:
        track = index["tracks"][cols.track[r]]
        # The row sits in its thread's track, under its process, at its exact time.
        assert track["process"] == processes[obj["pid"]]
        level = cols.level[r]
        thread = next(t for t in track["threads"] if t["level"] <= level < t["level"] + t["levels"])
        if "tid" in obj:
            assert thread["tid"] == obj["tid"] and thread["name"] == threads[(obj["pid"], obj["tid"])]
        assert cols.name[r] == obj["name"]
        assert cols.long_name[r] == obj.get("args", {}).get("long_name", "")
        assert round(cols.start[r]) == round(float(obj["ts"]) * 1e6)
        if obj["ph"] == "X":
            assert abs(cols.dur[r] - float(obj["dur"]) * 1e6) < 0.5
    return index


@needs_shared
@pytest.mark.parametrize("run", ["gpu_multi_worker", "tpu_inference_2", "jax_mlp", "tf_keras_input_bound"])
def test_every_chunk_event_is_drawn_once_in_its_track(run, tmp_path):
    capture = decoded_hosts(run)[0]
    folder = tmp_path / capture.host
    result = export_host(capture, run, folder, "json")
    index = _check_against_chunks(result, folder)
    assert result.timeline.tracks == len(index["tracks"])
    assert sum(t["events"] for t in index["tracks"]) == index["events"]
    assert [s[0] for s in index["steps"]] == [n for n, _, _ in result.steps]


@needs_shared
@pytest.mark.parametrize("max_events", [None, 5_000])
def test_the_chunks_are_the_same_with_or_without_the_timeline(tmp_path, max_events):
    """With the timeline, chunks are written from its windows' rendered events (in the windows' order);
    without, from their rows. The same events, heads and records either way, the Perfetto file the same
    bytes; with several chunks too (the windows are then also cut where the chunks are)."""
    capture = decoded_hosts("gpu_multi_worker")[0]
    seen = []
    for with_timeline in (False, True):
        folder = tmp_path / str(with_timeline) / capture.host
        caps = {"max_events": max_events} if max_events else {}
        result = export_host(capture, "run", folder, "both", timeline=with_timeline, **caps)
        contents = {}
        for chunk in result.chunks:
            path = folder.parent / chunk.file
            if chunk.format == "pftrace":
                contents[chunk.file] = hashlib.sha256(path.read_bytes()).hexdigest()
                continue
            doc = read_chunk(path)
            events = doc.pop("traceEvents")
            contents[chunk.file] = (doc, sorted(orjson.dumps(e, option=orjson.OPT_SORT_KEYS) for e in events))
        seen.append(([c.manifest_entry() | {"bytes": 0} for c in result.chunks], contents))
        assert (result.timeline is not None) == with_timeline
        assert (folder / timeline.DIR).exists() == with_timeline
    assert len(seen[0][0]) > (3 if max_events else 1)
    assert seen[0] == seen[1]


def _nested_capture(steps: int = 12, long_event: bool = False):
    """Steps on the python thread with nested ops, a two-thread pool, a device stream, and optionally
    one event on another thread that lasts as long as every step."""
    space = Space()
    host = space.plane("/host:CPU")
    main = host.line(1, "python")
    if long_event:
        host.line(9, "watchdog").event("watch", 0, steps * 1000 * NS)
    pool_a = host.line(7, "tf_Compute/7")
    pool_b = host.line(3, "tf_Compute/3")
    device = space.plane("/device:GPU:0", plane_id=1)
    stream = device.line(5, "Stream #5(Compute)")
    for k in range(steps):
        t0 = k * 1000 * NS
        main.event("train", t0, 900 * NS, _r=1, step_num=k)
        main.event("outer", t0 + 10 * NS, 500 * NS)
        for c in range(20):
            main.event("inner", t0 + 20 * NS + c * 20 * NS, 10 * NS, index=c)
        pool_a.event("work", t0 + 50 * NS, 100 * NS)
        pool_b.event("work", t0 + 60 * NS, 100 * NS)
        for c in range(30):
            stream.event("kernel", t0 + c * 25 * NS, 5 * NS)
    return space.capture()


def test_windows_levels_pools_and_detail_tiles(tmp_path, monkeypatch):
    capture = _nested_capture()
    monkeypatch.setattr(timeline, "LOD_MIN_EVENTS", 1)
    folder = tmp_path / "testhost"
    result = export_host(capture, "run", folder, "json")
    index = _check_against_chunks(result, folder)
    titles = [(t["process"], t["title"]) for t in index["tracks"]]
    # XProf's order (processes by pid: the GPU, then host threads by tid), the pool in one track where
    # its first thread stands.
    assert titles == [("testhost /device:GPU:0", "Stream #5(Compute)"), ("testhost /host:CPU", "python"),
                      ("testhost /host:CPU", "tf_Compute (2 threads)")]
    pool = index["tracks"][2]
    # Each thread of a pool under a row that names it.
    assert [(t["name"], t["level"], t["levels"]) for t in pool["threads"]] == [("tf_Compute/3", 1, 1),
                                                                               ("tf_Compute/7", 3, 1)]
    assert pool["levels"] == 4
    assert index["tracks"][1]["levels"] == 3  # train ⊃ outer ⊃ inner
    _, cols = read_columns(folder / timeline.DIR / "w-000.js")
    depth = {name: set(cols.level[[i for i, n in enumerate(cols.name) if n == name]]) for name in set(cols.name)}
    assert depth["train 0"] == {0} and depth["outer"] == {1} and depth["inner"] == {2}

    # The page's events per pixel: every event's start counted once in the density histogram.
    assert index["format"] == timeline.FORMAT
    density = index["density"]
    assert len(density["counts"]) == density["bins"] and sum(density["counts"]) == index["events"]
    # Level of detail: every event counted once per level, short neighbours merged at coarse levels.
    assert index["lod"]
    total = index["events"]
    for level in index["lod"]:
        counted, merged = 0, 0
        for tile, (key, blocks) in level["tiles"].items():
            header, cols = read_columns(folder / timeline.DIR / f"{key}.js")
            assert header["n"] == blocks
            first_tile = (cols.start - index["start"]) // level["tile"]
            own = (cols.count > 1) | (first_tile == int(tile))  # a long event counts in the tile it starts in
            counted += int(cols.count[own].sum())
            merged += int((cols.count > 1).sum())
        assert counted == total
    assert merged == 0 or index["lod"][-1]["resolution"] < index["lod"][0]["resolution"]


def test_windows_carry_running_events_and_cut_on_steps(tmp_path, monkeypatch):
    capture = _nested_capture(steps=12, long_event=True)
    monkeypatch.setattr(timeline, "WINDOW_EVENTS", 120)  # about two steps (54 events each) per window
    folder = tmp_path / "testhost"
    result = export_host(capture, "run", folder, "json")
    index = _check_against_chunks(result, folder)
    windows = index["windows"]
    assert len(windows) > 3
    step_starts = {s[1] for s in index["steps"]}
    assert all(w["start"] in step_starts for w in windows[1:])
    assert all(w["events"] <= 120 for w in windows)
    # The long event starts in the first window and is carried into every later one.
    for k, window in enumerate(windows):
        _, cols = read_columns(folder / timeline.DIR / f"{window['key']}.js")
        carried = [cols.name[i] for i in cols.carried]
        assert carried == ([] if k == 0 else ["watch"])


def _timeline_files(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted((folder / timeline.DIR).iterdir())}


def _lexsort_orders(monkeypatch) -> None:
    """The timeline's event orders as plain lexsorts, the definition its faster sorts must match."""
    monkeypatch.setattr(timeline, "_lane_order", lambda lane, start, end, _n: np.lexsort((-end, start, lane)))
    monkeypatch.setattr(timeline, "_track_level_order",
                        lambda _by_lane, start, track, level: np.lexsort((start, level, track)))


@needs_shared
@pytest.mark.parametrize("run", ["gpu_multi_worker", "tpu_inference_2", "jax_mlp"])
def test_the_timeline_orders_are_the_lexsorts(run, tmp_path, monkeypatch):
    """Events by lane then start, and by track, level and start, come from stable radix sorts of the rows'
    own order; the files are those the lexsorts give (pools, TPU cores' derived rows, device streams)."""
    capture = decoded_hosts(run)[0]
    export_host(capture, run, tmp_path / "fast" / capture.host, "json")
    with monkeypatch.context() as patched:
        _lexsort_orders(patched)
        export_host(capture, run, tmp_path / "lexsort" / capture.host, "json")
    assert _timeline_files(tmp_path / "fast" / capture.host) == _timeline_files(tmp_path / "lexsort" / capture.host)


def test_events_out_of_row_order_are_sorted_as_by_lexsort(tmp_path, monkeypatch):
    """A line whose events are not stored by start time (and ties of start, longest first or not) takes
    the lexsort; the files are the same."""
    space = Space()
    line = space.plane("/host:CPU").line(1, "python")
    for k in reversed(range(40)):
        line.event("outer", k * 100 * NS, 50 * NS)
        line.event("inner", k * 100 * NS, 20 * NS)  # same start, shorter: one level down
        line.event("late", k * 100 * NS + 30 * NS, 10 * NS)
    space.plane("/host:CPU").line(2, "other").event("x", 5 * NS, NS)
    capture = space.capture()
    export_host(capture, "run", tmp_path / "fast" / "testhost", "json")
    with monkeypatch.context() as patched:
        _lexsort_orders(patched)
        export_host(capture, "run", tmp_path / "lexsort" / "testhost", "json")
    assert _timeline_files(tmp_path / "fast" / "testhost") == _timeline_files(tmp_path / "lexsort" / "testhost")
    lane = np.array([0, 0, 1, 0])
    start, end = np.array([5, 3, 1, 3]), np.array([9, 4, 2, 8])
    assert timeline._lane_order(lane, start, end, 2).tolist() == [3, 1, 0, 2]


def test_capture_strings_cannot_end_the_script(tmp_path):
    space = Space()
    line = space.plane("/host:CPU").line(1, "</script><b>x</b>")
    line.event("</script><img src=x onerror=alert(1)>", 0, 10 * NS, note="</script>")
    result = export_host(space.capture(), "run", tmp_path / "testhost", "json")
    for path in (tmp_path / "testhost" / timeline.DIR).iterdir():
        assert b"<" not in path.read_bytes()
    index = read_index(tmp_path / "testhost" / timeline.DIR)
    assert index["tracks"][0]["title"] == "</script><b>x</b>"
    _, cols = read_columns(tmp_path / "testhost" / timeline.DIR / "w-000.js")
    assert cols.name == ["</script><img src=x onerror=alert(1)>"]
    assert result.timeline.events == 1


def test_a_small_hosts_parts_are_in_its_index_and_embed_as_from_files(tmp_path, monkeypatch):
    from reportgen.export.timeline_embed import excerpt_blocks, read_calls
    from tests.timeline_files import inline_parts

    def export(name: str) -> Path:
        space = Space()
        line = space.plane("/host:CPU").line(1, "python")
        for k in range(5):
            line.event(f"op{k}", k * 20 * NS, 10 * NS)
        export_host(space.capture(), "run", tmp_path / name, "json")
        return tmp_path / name / timeline.DIR

    one = export("one")
    assert [p.name for p in one.iterdir()] == ["index.js"]
    index = read_index(one)
    assert set(inline_parts(one)) == {"a-000", "w-000", "x-000", "xa-000"} and index["events"] == 5
    _, cols = read_columns(one / "w-000.js")  # the reader finds it in index.js
    assert cols.name == [f"op{k}" for k in range(5)]

    monkeypatch.setattr(timeline, "SMALL_TIMELINE_BYTES", 0)
    apart = export("apart")
    assert sorted(p.name for p in apart.iterdir()) == ["a-000.js", "index.js", "w-000.js", "x-000.js", "xa-000.js"]
    assert inline_parts(apart) == []
    # The single-file report embeds the same blocks, of the same size, either way; nothing without room.
    assert excerpt_blocks(one, 1 << 20) == excerpt_blocks(apart, 1 << 20)
    blocks, size = excerpt_blocks(one, 1 << 20)
    assert len(blocks) == 3 and size == sum((apart / f"{k}.js").stat().st_size for k in ("x-000", "xa-000"))
    assert len(excerpt_blocks(one, size - 1)[0]) == len(excerpt_blocks(apart, size - 1)[0]) == 1

    raw = (one / "index.js").read_bytes()
    assert len(read_calls(raw)) == 5
    for broken in (raw[:-1], raw.replace(b'},"', b'} "', 1), raw + b"x", b""):
        with pytest.raises(ValueError):
            read_calls(broken)


def test_vendored_flame_chart_is_the_pinned_version():
    folder = REPO / "reportgen" / "static" / "vendor" / "flame-chart-js"
    pinned = dict(line.split("=", 1) for line in (folder / "VERSION").read_text().splitlines())
    header = (folder / "flame-chart.min.js").read_text(encoding="utf-8")[:300]
    assert f"flame-chart-js v{pinned['version']}" in header
    assert "MIT License" in (folder / "LICENSE").read_text()
    assert re.fullmatch(r"sha512-[A-Za-z0-9+/=]{88}", pinned["integrity"])
    script = (REPO / "scripts" / "vendor" / "refresh_flame_chart_js.sh").read_text()
    assert "npm pack" in script and "VERSION" in script
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"static/vendor/*/*"' in pyproject


def test_counter_samples_are_counter_tracks_of_their_process(tmp_path):
    """A capture's counter samples (its `_counters_` line) become one counter track per counter name under their
    process, holding every sample at its time with the value the chunks give it."""
    space = Space()
    main = space.plane("/host:CPU").line(1, "python")
    tpu = space.plane("/device:TPU:0", plane_id=0)
    counters = tpu.line(9, "_counters_")
    tpu.line(10, "XLA Ops").event("fusion", 0, 50 * NS)
    for k in range(10):
        main.event("train", k * 1000 * NS, 900 * NS, _r=1, step_num=k)
        counters.event("HBM", k * 1000 * NS + 500 * NS, 0, value=float(k * k))
        if k % 2:
            counters.event("Queue", k * 1000 * NS + 100 * NS, 0, value=float(-k))
    folder = tmp_path / "testhost"
    result = export_host(space.capture(), "run", folder, "json")
    index = read_index(folder / timeline.DIR)
    chunk_samples: dict[str, list[tuple[float, float]]] = {}
    for rec in result.chunks:
        for e in read_chunk(folder.parent / rec.file)["traceEvents"]:
            if e.get("ph") == "C":
                chunk_samples.setdefault(e["name"], []).append((round(float(e["ts"]) * 1e6), e["args"]["value"]))
    tpu_process = next(t["process"] for t in index["tracks"] if t["process"].endswith("/device:TPU:0"))
    assert sorted(c["name"] for c in index["counters"]) == sorted(chunk_samples) == ["HBM", "Queue"]
    for c in index["counters"]:
        assert c["process"] == tpu_process and c["unit"] == ""
        header, raw = read_script(folder / timeline.DIR / f"{c['key']}.js")
        n = header["n"]
        times, values = np.cumsum(np.frombuffer(raw, "<f8", n)), np.frombuffer(raw, "<f8", n, 8 * n)
        assert list(zip(times.round().tolist(), values.tolist())) == sorted(chunk_samples[c["name"]])
        assert (c["n"], c["min"], c["max"]) == (n, float(values.min()), float(values.max()))
