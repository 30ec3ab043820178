"""Reading the trace export's Chrome JSON chunks back: the document, its track names, its named events."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson


def read_chunk(path: Path) -> dict:
    return orjson.loads(gzip.decompress(path.read_bytes()))


def track_names(doc: dict) -> tuple[dict, dict]:
    """The document's process names by pid and thread names by (pid, tid), from its metadata events."""
    processes, threads = {}, {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    return processes, threads


def named_events(doc: dict) -> list[dict]:
    """The document's non-metadata events, each with its process and thread names added."""
    processes, threads = track_names(doc)
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            continue
        out.append({**e, "process": processes.get(e["pid"]), "thread": threads.get((e["pid"], e.get("tid")))})
    return out
