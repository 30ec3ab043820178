"""Cloud TPU `.trace` (Trace proto) and `.tracetable` conversion speed: events/s of the decode and of the export.

    PYTHONPATH=. python bench/legacy_trace.py [--events 1000000] [--args-every 5] [--repeat 3]
        [--scratch /tmp/legacy-trace-bench] [--keep]

Writes a generated `<scratch>/bench.trace` (three devices of four resources,
302 op names, two of them with characters JSON escapes, 10% instant events,
a `long_name` arg on every `--args-every`-th event; times in picoseconds
since the start, as `capture_tpu_profile` wrote them), then, `--repeat`
times in this process, the best of:

* decode: `read_trace` on the file's bytes (the Trace proto into the
  export's columns);
* export: decode plus `ChromeTraceExport.add` and `finish` (chunks written
  as gzip JSON into the scratch folder, the activity overview computed);
* tracetable: the same events as a `.tracetable` (the LevelDB table layout
  of capture_tpu_profile 1.9's streaming trace, Snappy blocks of 64 KiB,
  written by tests/sstable_writer.py), decoded by `read_trace`, and the ratio
  to the `.trace` decode of the same run.

The machine is shared and noisy: compare runs made one after the other.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from reportgen.legacy.chrome_trace import read_trace
from reportgen.legacy.sstable import crc32c
from reportgen.legacy.timeline_chunks import ChromeTraceExport
from reportgen.loaders.proto import trace_events_pb2 as tpb
from tests.sstable_writer import tracetable

NAMES = [f"fusion.{i}" for i in range(300)] + ['while/body "q"\\x', "conv\u00e9\t1"]


def generate(n: int, args_every: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    trace = tpb.Trace()
    for did, name in ((1, "/host:CPU"), (2, "TPU:0"), (3, "TPU:1")):
        device = trace.devices[did]
        device.name, device.device_id = name, did
        for rid in range(1, 5):
            device.resources[rid].name = f"{name} stream {rid}"
            device.resources[rid].resource_id = rid
    dev = rng.choice([1, 2, 3], n).tolist()
    res = rng.integers(1, 5, n).tolist()
    names = rng.integers(0, len(NAMES), n).tolist()
    ts = (np.cumsum(rng.integers(0, 3_000_000, n)) + 123_456_789).tolist()
    dur = rng.integers(0, 5_000_000, n)
    dur[rng.random(n) < 0.1] = 0
    dur = dur.tolist()
    events = trace.trace_events
    for i in range(n):  # generating the input, not the code measured
        event = events.add(device_id=dev[i], resource_id=res[i], name=NAMES[names[i]], timestamp_ps=ts[i],
                           duration_ps=dur[i])
        if args_every and i % args_every == 0:
            event.args["long_name"] = f"{NAMES[names[i]]} = f32[8,128] fusion(p.{i})"
    return trace.SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--args-every", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scratch", default=None, help="folder for the generated file and chunks")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="legacy-trace-bench-"))
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / "bench.trace"
    if not path.exists():
        path.write_bytes(generate(args.events, args.args_every))
    data = path.read_bytes()
    read_trace(str(path), data[:0] + data)  # warm-up (compiled kernels load from their cache)
    decode, export = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        trace = read_trace(str(path), data)
        decode.append(time.perf_counter() - started)
        out = scratch / "chunks"
        shutil.rmtree(out, ignore_errors=True)
        started = time.perf_counter()
        trace = read_trace(str(path), data)
        writer = ChromeTraceExport("bench", "bench", out)
        writer.add(trace)
        result = writer.finish()
        export.append(time.perf_counter() - started)
        events = result.events
        del trace
    print(f"{path} ({len(data) / 2**20:.1f} MiB, {events:,} events, {len(result.chunks)} chunks)")
    print(f"decode: best {min(decode):.3f} s  {events / min(decode):,.0f} events/s")
    print(f"export: best {min(export):.3f} s  {events / min(export):,.0f} events/s")
    table_path = scratch / "bench.tracetable"
    if not table_path.exists():
        trace_proto = tpb.Trace.FromString(data)
        table_path.write_bytes(tracetable(trace_proto, block_size=64 * 1024, crc=crc32c))
        del trace_proto
    table = table_path.read_bytes()
    read_trace(str(table_path), table)  # warm-up
    table_decode = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        read_trace(str(table_path), table)
        table_decode.append(time.perf_counter() - started)
    print(f"{table_path} ({len(table) / 2**20:.1f} MiB): decode best {min(table_decode):.3f} s  "
          f"{events / min(table_decode):,.0f} events/s, {min(table_decode) / min(decode):.2f}x the .trace decode")
    if not args.keep and args.scratch is None:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
