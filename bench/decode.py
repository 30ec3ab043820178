"""Decode benchmark: reportgen's decoder against a bare protobuf parse.

    python bench/decode.py [--factors 10,50,200] [--repeat N] [--json OUT.json]

For every shared capture and for the GPU run tiled ×10, ×50 and ×200
(`bench/tile.py`; written under bench/out/ when missing), each measurement
runs in a fresh subprocess, so peak RSS (ru_maxrss) belongs to that one job:

* decode: `decode_xspace(path, bytes)` → HostCapture (tables), the first call
  in the process (loading the compiled walker from numba's cache included);
* parse: `XSpace.ParseFromString(bytes)` (upb), the floor the decoder is
  measured against.

Both time only the work on bytes already in memory; reading the file is
reported apart. With --repeat N the two jobs alternate N times per file and
the fastest of each is kept (this machine is shared: ratios from one run are
what count). A last section compares the first decode with an empty numba
cache (compile included) with a warm one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.tile import ensure_tiled  # noqa: E402

SHARED = Path(os.environ.get("REPORTGEN_SHARED", REPO.parent / "shared"))
LOGDIR = SHARED / "captures" / "logdir" / "plugins" / "profile"
GPU_RUN = LOGDIR / "gpu_multi_worker" / "34.83.195.179_6003.xplane.pb"
SAMPLE = REPO / "reportgen" / "sample" / "plugins" / "profile" / "tf_keras_fast" / "vm.xplane.pb"
OUT = REPO / "bench" / "out"

# Runs inside the subprocess: prints one JSON line.
CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if mode == "decode":
    from reportgen.loaders.xspace import decode_xspace
else:
    from reportgen.loaders.proto import xplane_pb2
t1 = time.perf_counter()
rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with open(path, "rb") as f:
    data = f.read()
t2 = time.perf_counter()
cpu0 = time.process_time()
t3 = time.perf_counter()
if mode == "decode":
    capture = decode_xspace(path, data)
    t4 = time.perf_counter()
    cpu = time.process_time() - cpu0
    events, stats = len(capture.events), len(capture.event_stats)
else:
    space = xplane_pb2.XSpace()
    space.ParseFromString(data)
    t4 = time.perf_counter()
    cpu = time.process_time() - cpu0
    events = sum(len(line.events) for plane in space.planes for line in plane.lines)
    stats = -1
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"import_s": t1 - t0, "read_s": t2 - t1, "seconds": t4 - t3, "cpu_s": cpu,
                  "rss_before_kb": rss_before, "rss_kb": rss, "events": events, "stats": stats}))
"""


@dataclass
class Job:
    import_s: float
    read_s: float
    seconds: float
    cpu_s: float
    rss_before_kb: int
    rss_kb: int
    events: int
    stats: int


def run_child(mode: str, path: Path, env: dict | None = None) -> Job:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{mode} {path} failed:\n{out.stderr}")
    return Job(**json.loads(out.stdout.strip().splitlines()[-1]))


@dataclass
class Row:
    name: str
    path: str
    size_bytes: int
    events: int
    stats: int
    read_s: float
    decode_s: float
    decode_cpu_s: float
    decode_rss_mb: float
    parse_s: float
    parse_cpu_s: float
    parse_rss_mb: float
    base_rss_mb: float  # the decode process after imports, before reading

    @property
    def events_per_s(self) -> float:
        return self.events / self.decode_s if self.decode_s else 0.0

    @property
    def ratio(self) -> float:
        return self.decode_s / self.parse_s if self.parse_s else 0.0

    @property
    def cpu_ratio(self) -> float:
        return self.decode_cpu_s / self.parse_cpu_s if self.parse_cpu_s else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "events_per_s": self.events_per_s, "decode_over_parse": self.ratio,
                "decode_over_parse_cpu": self.cpu_ratio,
                "decode_rss_over_file": self.decode_rss_mb * 2**20 / self.size_bytes,
                "parse_rss_over_file": self.parse_rss_mb * 2**20 / self.size_bytes}


def measure(name: str, path: Path, repeat: int) -> Row:
    decodes, parses = [], []
    for _ in range(repeat):
        decodes.append(run_child("decode", path))
        parses.append(run_child("parse", path))
    d = min(decodes, key=lambda j: j.seconds)
    p = min(parses, key=lambda j: j.seconds)
    if d.events != p.events:
        raise RuntimeError(f"{path}: decode found {d.events} events, protobuf {p.events}")
    return Row(
        name=name, path=str(path), size_bytes=path.stat().st_size, events=d.events, stats=d.stats,
        read_s=min(j.read_s for j in decodes), decode_s=d.seconds, decode_cpu_s=min(j.cpu_s for j in decodes),
        decode_rss_mb=max(j.rss_kb for j in decodes) / 1024, parse_s=p.seconds,
        parse_cpu_s=min(j.cpu_s for j in parses), parse_rss_mb=max(j.rss_kb for j in parses) / 1024,
        base_rss_mb=min(j.rss_before_kb for j in decodes) / 1024,
    )


def cold_vs_warm(path: Path) -> dict:
    """First decode in a process with an empty numba cache, then with the cache it left."""
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env = {"NUMBA_CACHE_DIR": cache}
        cold = run_child("decode", path, env)
        warm = run_child("decode", path, env)
    return {"file": str(path), "cold_import_s": cold.import_s, "cold_decode_s": cold.seconds,
            "warm_import_s": warm.import_s, "warm_decode_s": warm.seconds}


def print_table(rows: list[Row]) -> None:
    head = (f"{'file':<34} {'MB':>7} {'events':>10} {'decode s':>9} {'events/s':>11} {'RSS MB':>8} {'×file':>6}"
            f" {'parse s':>8} {'RSS MB':>8} {'×file':>6} {'dec/parse':>9} {'cpu ratio':>9}")
    print(head)
    print("-" * len(head))
    for r in rows:
        mb = r.size_bytes / 2**20
        print(f"{r.name:<34} {mb:>7.1f} {r.events:>10,} {r.decode_s:>9.3f} {r.events_per_s:>11,.0f}"
              f" {r.decode_rss_mb:>8.0f} {r.decode_rss_mb / mb:>6.2f} {r.parse_s:>8.3f} {r.parse_rss_mb:>8.0f}"
              f" {r.parse_rss_mb / mb:>6.2f} {r.ratio:>9.2f} {r.cpu_ratio:>9.2f}")
    print(f"(decode process after imports, before reading: {min(r.base_rss_mb for r in rows):.0f} MB RSS;"
          " dec/parse = wall-time ratio, cpu ratio = same with CPU time)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--factors", default="10,50,200", help="tiling factors of the GPU run ('' for none)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per file and job (fastest kept)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--no-cold", action="store_true", help="skip the empty-numba-cache measurement")
    args = parser.parse_args(argv)

    files: list[tuple[str, Path]] = []
    if LOGDIR.exists():
        files += [(f"{p.parent.name}/{p.name.split('.xplane')[0]}", p) for p in sorted(LOGDIR.glob("*/*.xplane.pb"))]
    else:
        print(f"shared captures not found at {LOGDIR}; only the bundled sample", file=sys.stderr)
        files.append(("sample/tf_keras_fast", SAMPLE))
    factors = [int(f) for f in args.factors.split(",") if f.strip()]
    for n in factors:
        if not GPU_RUN.exists():
            break
        files.append((f"gpu_multi_worker ×{n}", ensure_tiled(GPU_RUN, n, OUT)))

    run_child("decode", SAMPLE)  # make sure numba's cache is warm
    rows = []
    for name, path in files:
        rows.append(measure(name, path, args.repeat))
        print(f"  measured {name}", file=sys.stderr)
    print_table(rows)

    result: dict = {"rows": [r.as_dict() for r in rows]}
    if not args.no_cold:
        cw = cold_vs_warm(SAMPLE)
        result["numba_cache"] = cw
        print(f"\nFirst decode of {SAMPLE.name} ({SAMPLE.parent.name}): empty numba cache "
              f"import {cw['cold_import_s']:.2f} s + decode {cw['cold_decode_s']:.2f} s (compile); "
              f"warm cache import {cw['warm_import_s']:.2f} s + decode {cw['warm_decode_s']:.3f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
