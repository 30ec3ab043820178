"""Kernel stats timing: decoded capture → section data, and XProf's kernel_stats tool on the same files.

    PYTHONPATH=. python bench/kernel_stats.py [--run gpu_multi_worker] [--tiles 10,50]
        [--xprof-python /tmp/xprofvenv/bin/python] [--repeat 5]

For each capture set (the real run's host files, then the same files tiled
N times in time when `bench/tile.py` is available) it reports, as the best
of `--repeat` runs in this process:

* decode: the wire decoder, file bytes → HostCapture (context only);
* kernel stats: every host's `KernelStatsSection.host_part` plus `combine`,
  i.e. from the decoded captures to the page's data (the kernel stats DB is
  part of the host's OpStats, which is built whole, as XProf builds it);
* XProf: `xspace_to_tool_data(paths, "kernel_stats")` in XProf's own Python
  (a separate venv with `pip install xprof`), timed inside that process: it
  parses the files and builds its OpStats, so compare it with decode +
  kernel stats.

The machine is shared and noisy: read the ratios of one run, not the seconds.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from reportgen.loaders.xspace import decode_xspace  # noqa: E402
from reportgen.pipeline.host_stage import host_context  # noqa: E402
from reportgen.sections.base import HostSummary, RunContext  # noqa: E402
from reportgen.sections.kernel_stats import KernelStatsSection  # noqa: E402

DEFAULT_LOGDIR = REPO.parent / "shared" / "captures" / "logdir"

XPROF_SCRIPT = r"""
import json, shutil, sys, tempfile, time, os
from xprof.convert import raw_to_tool_data as r
sources, repeat = json.loads(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    paths = []
    for s in sources:
        shutil.copy(s, tmp)
        paths.append(os.path.join(tmp, os.path.basename(s)))
    r.xspace_to_tool_names(paths)
    times, rows = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        data, _ = r.xspace_to_tool_data(paths, "kernel_stats", {"use_saved_result": False})
        times.append(time.perf_counter() - t)
        rows = len(json.loads(data)["rows"])
print(json.dumps({"times": times, "rows": rows}))
"""


def _load_tiler(path: str | None):
    """`bench/tile.py` (XSpace tiling in time) when the project has it, else the file given."""
    if path:
        spec = importlib.util.spec_from_file_location("bench_tile", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        saved = list(sys.path)
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path[:] = saved  # the tiler may put its own checkout first; keep timing this one
        return module
    try:
        return importlib.import_module("bench.tile")
    except ImportError:
        return None


def _best(times: list[float]) -> str:
    return f"{min(times):.3f} s (median {statistics.median(times):.3f})"


def time_reportgen(paths: list[Path], repeat: int) -> dict:
    decode_times, section_times, rows = [], [], 0
    section = KernelStatsSection()
    for _ in range(repeat):
        t = time.perf_counter()
        captures = [decode_xspace(str(p), p.read_bytes()) for p in paths]
        decode_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        parts = {}
        for capture in captures:
            part = section.host_part(host_context("bench", capture, ""))
            if part is not None:
                parts[capture.host] = part
        summaries = [HostSummary(c.host, c.path, c.size_bytes, 0, 0, 0, 0, "", 0) for c in captures]
        data = section.combine(RunContext("bench", summaries), parts)
        section_times.append(time.perf_counter() - t)
        rows = len(data.combined) if data else 0
        events = sum(c.event_count for c in captures)
        del captures
    return {"decode": decode_times, "kernel_stats": section_times, "rows": rows, "events": events}


def time_xprof(python: str, paths: list[Path], repeat: int) -> dict | None:
    try:
        done = subprocess.run([python, "-c", XPROF_SCRIPT, json.dumps([str(p) for p in paths]), str(repeat)],
                              capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"  XProf: not run ({exc})")
        return None
    if done.returncode != 0:
        print(f"  XProf: failed ({done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode})")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(label: str, paths: list[Path], args) -> None:
    size = sum(p.stat().st_size for p in paths)
    ours = time_reportgen(paths, args.repeat)
    print(f"{label}: {len(paths)} host file(s), {size / 1e6:.1f} MB, {ours['events']:,} events, "
          f"{ours['rows']} kernel rows")
    print(f"  decode                     {_best(ours['decode'])}")
    print(f"  kernel stats (section data) {_best(ours['kernel_stats'])}")
    if args.xprof_python:
        theirs = time_xprof(args.xprof_python, paths, args.xprof_repeat)
        if theirs:
            xprof = min(theirs["times"])
            ours_total = min(ours["decode"]) + min(ours["kernel_stats"])
            print(f"  XProf kernel_stats tool    {_best(theirs['times'])}, {theirs['rows']} rows")
            print(f"  ratio XProf / (decode + kernel stats) = {xprof / ours_total:.1f}×; "
                  f"XProf / kernel stats alone = {xprof / min(ours['kernel_stats']):.0f}×")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logdir", default=str(DEFAULT_LOGDIR))
    parser.add_argument("--run", default="gpu_multi_worker")
    parser.add_argument("--tiles", default="10,50", help="tiling factors (needs bench/tile.py); '' for none")
    parser.add_argument("--tile-module", help="path of a tile.py to use when bench/tile.py is absent")
    parser.add_argument("--xprof-python", help="python of a venv with xprof installed")
    parser.add_argument("--xprof-max-tile", type=int, default=10, help="largest tiling XProf is timed on")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--xprof-repeat", type=int, default=3)
    args = parser.parse_args(argv)

    run_dir = Path(args.logdir) / "plugins" / "profile" / args.run
    paths = sorted(run_dir.glob("*.xplane.pb"))
    if not paths:
        print(f"no host files under {run_dir}", file=sys.stderr)
        return 1
    report(f"{args.run} (as captured)", paths, args)

    factors = [int(f) for f in args.tiles.split(",") if f.strip()]
    tiler = _load_tiler(args.tile_module) if factors else None
    if factors and tiler is None:
        print("tiled captures skipped: bench/tile.py is not in this checkout (use --tile-module)")
        return 0
    with tempfile.TemporaryDirectory(prefix="kernel-stats-bench-") as tmp:
        for factor in factors:
            # One host file tiled: the two shared host files are identical copies.
            tiled = [tiler.ensure_tiled(paths[0], factor, Path(tmp))]
            xprof_python = args.xprof_python
            if factor > args.xprof_max_tile:
                args.xprof_python = None
            report(f"{args.run} host 1 tiled ×{factor}", tiled, args)
            args.xprof_python = xprof_python
    return 0


if __name__ == "__main__":
    sys.exit(main())
