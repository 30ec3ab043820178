"""Trace export benchmark: throughput, peak memory and bytes per event on tiled GPU captures.

    python bench/trace.py [--copies 50 200] [--xprof-python /tmp/xprofvenv/bin/python]

For each tiling factor: the shared GPU capture repeated N times in time, then,
each in a fresh process (so peak RSS is that run's alone):
* reportgen: decode, then export the JSON chunks (gzip level 1, as the site
  does), or the Perfetto file; times, events/s, RSS with the capture decoded,
  the decode's peak, the peak during the export (VmHWM reset after decoding),
  output bytes per event;
* XProf's `trace_viewer@` on the same file (when an XProf install is given:
  a separate venv with `pip install xprof`), called as the oracle was made
  but with resolution 0, so that it too returns every event (its default
  thins out windows of more than 500,000 events).
Wall times and CPU times (all threads) are both reported: on a shared machine
CPU time is the steadier of the two.
Also the `perfetto` package's TraceProtoBuilder, per event, to show why the
Perfetto file has its own compiled encoder.

Results print as a table and go to bench/out/trace.json. Timings on a shared
2-core machine are noisy: compare ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
SOURCE = REPO.parent / "shared" / "captures" / "logdir" / "plugins" / "profile" / "gpu_multi_worker" / \
    "34.83.195.179_6003.xplane.pb"

REPORTGEN_CHILD = r"""
import json, os, resource, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from reportgen.loaders.logdir import read_file
from reportgen.loaders.xspace import decode_xspace
from reportgen.export.host_export import export_host

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
def hwm():
    return status("VmHWM")
def reset_hwm():
    # Writing 5 to clear_refs resets the peak RSS (Linux >= 4.0), so the export's own peak shows.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
path, fmt = sys.argv[2], sys.argv[3]
out = {"format": fmt}
t, c = time.perf_counter(), time.process_time()
capture = decode_xspace(path, read_file(path))
out["decode_s"], out["decode_cpu_s"] = time.perf_counter() - t, time.process_time() - c
out["events_in_file"] = capture.event_count
out["rss_peak_decode"] = hwm()
out["rss_after_decode"] = status("VmRSS")
out["hwm_reset"] = reset_hwm()
with tempfile.TemporaryDirectory() as tmp:
    t, c = time.perf_counter(), time.process_time()
    result = export_host(capture, "bench", tmp + "/" + capture.host, fmt)
    out["export_s"], out["export_cpu_s"] = time.perf_counter() - t, time.process_time() - c
    out["rss_peak"] = hwm()
    out["events"] = result.events
    out["files"] = len(result.chunks)
    out["bytes"] = sum(c.bytes for c in result.chunks)
    out["json_bytes"] = sum(c.json_bytes or 0 for c in result.chunks)
print(json.dumps(out))
"""

XPROF_CHILD = r"""
import json, sys, time
from xprof.convert import raw_to_tool_data as r
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
path = sys.argv[1]
t, c = time.perf_counter(), time.process_time()
r.xspace_to_tool_names([path])
# resolution 0: every event (the oracle's 8000 thins out windows of more than 500,000 events).
data, _ = r.xspace_to_tool_data([path], "trace_viewer@", {"use_saved_result": False,
                                "trace_viewer_options": {"resolution": 0, "full_dma": False}})
seconds, cpu = time.perf_counter() - t, time.process_time() - c
size = len(data) if data is not None else 0
events = json.loads(data).get("returnedEventsSize") if data else 0
print(json.dumps({"seconds": seconds, "cpu_s": cpu, "bytes": size, "events": events, "rss_peak": hwm()}))
"""

PERFETTO_BUILDER_CHILD = r"""
import json, sys, time
from perfetto.trace_builder.proto_builder import TraceProtoBuilder
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
n = int(sys.argv[1])
builder = TraceProtoBuilder()
t = time.perf_counter()
for i in range(n):
    for kind in (TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END):
        packet = builder.add_packet()
        packet.timestamp = i * 10 + (5 if kind == TrackEvent.TYPE_SLICE_END else 0)
        packet.trusted_packet_sequence_id = 1
        packet.track_event.type = kind
        packet.track_event.track_uuid = 1
        if kind == TrackEvent.TYPE_SLICE_BEGIN:
            packet.track_event.name = "kernel"
            a = packet.track_event.debug_annotations.add()
            a.name = "group_id"
            a.int_value = i
data = builder.serialize()
print(json.dumps({"events": n, "seconds": time.perf_counter() - t, "bytes": len(data)}))
"""


def _run(cmd: list[str], timeout: int = 1800) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _tiled(copies: int) -> Path:
    from bench.tile import ensure_tiled

    return ensure_tiled(SOURCE, copies, OUT)


def _xprof(python: str, path: Path) -> dict:
    # XProf writes cache files beside its input: give it a private link to the file.
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        link = Path(tmp) / path.name
        os.link(path, link)
        return _run([python, "-c", XPROF_CHILD, str(link)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--xprof-python", default="/tmp/xprofvenv-trace/bin/python",
                        help="python of a venv with xprof installed (skipped when absent)")
    parser.add_argument("--builder-events", type=int, default=200_000)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict = {"runs": []}
    python = sys.executable
    # Compile (or load from numba's cache) the writers once, so no measured run pays for it.
    for fmt in ("json", "perfetto"):
        _run([python, "-c", REPORTGEN_CHILD, str(REPO), str(SOURCE), fmt])
    for copies in args.copies:
        started = time.perf_counter()
        path = _tiled(copies)
        row: dict = {"copies": copies, "file_bytes": path.stat().st_size, "tile_s": time.perf_counter() - started}
        row["json"] = _run([python, "-c", REPORTGEN_CHILD, str(REPO), str(path), "json"])
        row["perfetto"] = _run([python, "-c", REPORTGEN_CHILD, str(REPO), str(path), "perfetto"])
        if shutil.which(args.xprof_python) or Path(args.xprof_python).exists():
            row["xprof"] = _xprof(args.xprof_python, path)
        results["runs"].append(row)
        _print_row(row)
    try:
        builder = _run([python, "-c", PERFETTO_BUILDER_CHILD, str(args.builder_events)])
        results["perfetto_builder"] = builder
        print(f"perfetto TraceProtoBuilder: {builder['events'] / builder['seconds']:,.0f} events/s "
              f"({builder['seconds'] / builder['events'] * 1e6:.1f} µs per event, Python calls only)")
    except RuntimeError as exc:
        print(f"perfetto TraceProtoBuilder not measured: {exc}")
    (OUT / "trace.json").write_text(json.dumps(results, indent=1))
    return 0


def _print_row(row: dict) -> None:
    mb = 1 << 20
    print(f"\n×{row['copies']}: {row['file_bytes'] / 1e6:.0f} MB capture")
    for fmt in ("json", "perfetto"):
        r = row[fmt]
        rate = r["events"] / r["export_s"]
        print(f"  reportgen {fmt:8s}: {r['events']:,} events, decode {r['decode_s']:.2f} s "
              f"(CPU {r['decode_cpu_s']:.2f} s), export {r['export_s']:.2f} s (CPU {r['export_cpu_s']:.2f} s; "
              f"{rate:,.0f} events/s), "
              f"peak RSS during export {r['rss_peak'] / mb:,.0f} MiB (capture tables resident: "
              f"{r['rss_after_decode'] / mb:,.0f} MiB; decode peak {r['rss_peak_decode'] / mb:,.0f} MiB), "
              f"{r['bytes'] / r['events']:.1f} B/event on disk"
              + (f", {r['json_bytes'] / r['events']:.0f} B/event JSON" if r["json_bytes"] else ""))
    if "xprof" in row:
        x = row["xprof"]
        j = row["json"]
        ours = j["decode_s"] + j["export_s"]
        ours_cpu = j["decode_cpu_s"] + j["export_cpu_s"]
        print(f"  XProf trace_viewer@ : {x['events']:,} events, {x['seconds']:.2f} s (CPU {x['cpu_s']:.2f} s; "
              f"{x['events'] / x['seconds']:,.0f} events/s), peak RSS {x['rss_peak'] / mb:,.0f} MiB, "
              f"{x['bytes'] / 1e6:,.0f} MB JSON ({x['bytes'] / max(x['events'], 1):.0f} B/event)")
        print(f"  throughput vs XProf : export {x['seconds'] / j['export_s']:.1f}× "
              f"(CPU {x['cpu_s'] / j['export_cpu_s']:.1f}×), "
              f"decode+export {x['seconds'] / ours:.1f}× (CPU {x['cpu_s'] / ours_cpu:.1f}×)")


if __name__ == "__main__":
    sys.exit(main())
