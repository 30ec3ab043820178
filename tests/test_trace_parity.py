"""Parity with XProf's trace_viewer@ on every oracle run: the union of a host's chunks holds the
same events as XProf's output for that host, up to the differences listed (and shown on the page).

Compared per event: (process name, thread name, event name, ts, dur) as a multiset; flow arrows
as the partition of events by bind_id (with direction and category); `group_id` where both have it.

The rows XProf derives while loading a capture (a TPU core's Framework Ops, Framework Name Scope,
Source code and Host Offload Ops) are exported too: every XProf event is in the export, and every row
holds as many events as XProf's.

Documented differences, each checked to be exactly that:
* ASYNC — events flagged async (`_a`) are async `b`/`e` events in the export; XProf's streaming JSON
  leaves them out.
* GROUP_ID — XProf computes step groups for captures that are not grouped yet; the export carries
  `group_id` only where the capture stores it. Where both have one, they are equal.
* XProf's `uid` arg (its key for fetching details) and `z` (a serial) have no meaning outside XProf.
"""

from __future__ import annotations

import gzip
from collections import Counter, defaultdict
from pathlib import Path

import orjson
import pytest

from reportgen.core.events.derived_timeline import derived_tpu_lines
from reportgen.core.events.grouping import group_events
from reportgen.core.events.table import EventTable
from reportgen.export.flows import is_grouped
from reportgen.export.host_export import export_host
from reportgen.export.tables import AddedRows
from reportgen.loaders.xspace import decode_xspace
from tests.chrome_json import track_names
from tests.conftest import ORACLE, host_files, needs_shared

ORACLE_RUNS = sorted(p.name for p in ORACLE.iterdir() if (p / "trace_viewer@.json.gz").exists()) \
    if ORACLE.exists() else []


def _oracle_file(run: str, host: str) -> Path:
    per_host = ORACLE / run / "per_host" / host / "trace_viewer@.json.gz"
    return per_host if per_host.exists() else ORACLE / run / "trace_viewer@.json.gz"


def _events(doc: dict) -> tuple[list[tuple], dict]:
    processes, threads = track_names(doc)
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") in (None, "M"):
            continue
        key = (processes.get(e["pid"]), threads.get((e["pid"], e.get("tid"))), e["name"], e["ts"], e.get("dur"))
        out.append((key, e))
    return out, threads


def added_rows(capture) -> AddedRows:
    """The rows XProf derives on the capture's TPU cores, as the trace section passes them."""
    table = EventTable(capture)
    derived = derived_tpu_lines(table, group_events(table))
    return AddedRows(derived.lines, derived.line, derived.start_ps, derived.duration_ps, derived.name)


def _flow_groups(events) -> Counter:
    groups = defaultdict(list)
    for key, e in events:
        if "bind_id" in e:
            groups[e["bind_id"]].append((key, bool(e.get("flow_out")), bool(e.get("flow_in")), e.get("cat")))
    return Counter(tuple(sorted(g)) for g in groups.values())


CASES = [(run, path) for run in ORACLE_RUNS for path in host_files(run)]


@needs_shared
@pytest.mark.parametrize("run,path", CASES, ids=[f"{r}/{p.stem}" for r, p in CASES])
def test_chunks_hold_xprofs_events(run, path, tmp_path):
    capture = decode_xspace(str(path), path.read_bytes())
    # A small chunk cap, so the union of several chunks is what is compared.
    result = export_host(capture, run, tmp_path / capture.host, max_events=8000, added=added_rows(capture))
    chunks = [c for c in result.chunks if c.format == "json.gz"]
    assert len(chunks) > 1 or result.events <= 8000
    ours, our_threads = [], {}
    for chunk in chunks:
        events, threads = _events(orjson.loads(gzip.decompress((tmp_path / chunk.file).read_bytes())))
        ours.extend(events)
        our_threads.update(threads)
    theirs, their_threads = _events(orjson.loads(gzip.decompress(_oracle_file(run, capture.host).read_bytes())))

    # Threads: every exported thread is XProf's, with the same pid, tid and name.
    assert set(our_threads.items()) <= set(their_threads.items())

    mine = Counter(k for k, _ in ours)
    xprof = Counter(k for k, _ in theirs)
    only_xprof = xprof - mine
    only_ours = mine - xprof
    assert not only_xprof, f"every XProf event is exported, derived rows included: {list(only_xprof)[:5]}"
    rows = Counter((k[0], k[1]) for k, e in ours if e["ph"] not in ("b", "e"))
    assert rows == Counter((k[0], k[1]) for k, _ in theirs), "every row holds as many events as XProf's"
    async_keys = Counter(k for k, e in ours if e["ph"] in ("b", "e"))
    assert only_ours == async_keys, "events XProf's JSON lacks are exactly the async ones"

    # Flow arrows pair the same events, with XProf's directions and categories.
    assert _flow_groups(ours) == _flow_groups(theirs)

    # group_id: equal wherever both have it; XProf alone has it only when it grouped the capture itself.
    our_groups = Counter((k, e["args"]["group_id"]) for k, e in ours if "group_id" in e.get("args", {}))
    their_groups = Counter((k, e["args"]["group_id"]) for k, e in theirs if "group_id" in e.get("args", {}))
    if is_grouped(capture):
        assert our_groups == their_groups
    else:
        assert not our_groups and their_groups
