"""Whole-site build timing: `reportgen build` per stage, against XProf's tools on the same file.

    PYTHONPATH=. python bench/build.py [--tiles 10,50,200] [--xprof-python /tmp/xprofvenv-b/bin/python]
        [--parallel-hosts 8 --parallel-tile 5] [--skip-xprof] [--sample 5] [--out bench/out/build]

First, `--sample N` rebuilds of the bundled sample (`--no-cache`, kernels
compiled): the fixed costs every build pays (target: ≤ 1.5 s process wall).
Then, for each size (the GPU capture of gpu_multi_worker, one host, tiled N times
in time; tiles are generated once into `--out` and reused) it runs, each in
a fresh process, in this order:

* `reportgen build LOGDIR -o SITE --no-cache --timings` (every tool page,
  CSVs, summary.json, assets): the process wall time (Python start and
  imports included), the build's own time, its per-stage table (decode,
  each section's host part / combine / render, assets, outputs …), the CPU
  time and the peak RSS of the process and of every process it started
  (this process adopts their orphans, such as the workers' fork server);
* when XProf is installed (`python3 -m venv /tmp/xprofvenv-b &&
  /tmp/xprofvenv-b/bin/pip install xprof`), each of XProf's tools cold, in
  its own process on a temporary copy of the file (XProf writes cache files
  beside its inputs), as /work/shared/captures/README.md does:
  `xspace_to_tool_names` then `xspace_to_tool_data`. Their sum is compared
  with the reportgen build.

Then the time per event from the smallest to the largest size (the target:
flat within 25%), and, with `--parallel-hosts H`, a run of H copies of the
`--parallel-tile` tile built with `--jobs 1` and with `--jobs <cores>`
(the hosts stage should take about serial time / cores), plus the start-up
cost of the worker processes.

The machine is shared and noisy: read the ratios of one run, not the
seconds, and the CPU times where the wall times swing with the load. Captures are tiled with bench/tile.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The checkout whose reportgen is measured (`--checkout`, default this one): another one's code is
# measured with this script's methods, so that two branches' figures compare.
CHECKOUT = REPO
MAX_MEMORY = ""  # `--max-memory`, passed on to reportgen build
SOURCE = REPO.parent / "shared/captures/logdir/plugins/profile/gpu_multi_worker/34.83.195.179_6003.xplane.pb"
DEFAULT_OUT = REPO / "bench" / "out" / "build"
DEFAULT_XPROF = "/tmp/xprofvenv-b/bin/python"

# XProf's tools behind reportgen's pages, with the parameters the oracle used.
XPROF_TOOLS: dict[str, dict] = {
    "overview_page": {},
    "input_pipeline_analyzer": {},
    "framework_op_stats": {},
    "kernel_stats": {},
    "memory_profile": {},
    "pod_viewer": {},
    "trace_viewer@": {"trace_viewer_options": {"resolution": 8000, "full_dma": False}},
}

XPROF_SCRIPT = r"""
import json, os, resource, shutil, sys, tempfile, time
t0 = time.perf_counter()
from xprof.convert import raw_to_tool_data as r
imported = time.perf_counter() - t0
src, tool, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
folder = tempfile.mkdtemp()
try:
    path = os.path.join(folder, os.path.basename(src))
    shutil.copy(src, path)
    t = time.perf_counter()
    r.xspace_to_tool_names([path])
    data, _ = r.xspace_to_tool_data([path], tool, {"use_saved_result": False, **params})
    seconds = time.perf_counter() - t
finally:
    shutil.rmtree(folder, ignore_errors=True)
size = len(data) if data else 0
print(json.dumps({"seconds": seconds, "import": imported, "bytes": size,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

POOL_START_SCRIPT = r"""
import json, time
from concurrent.futures import ProcessPoolExecutor
t0 = time.perf_counter()
from reportgen.pipeline.runners import pool_context
imported = time.perf_counter() - t0
t = time.perf_counter()
with ProcessPoolExecutor(max_workers=2, mp_context=pool_context()) as pool:
    list(pool.map(abs, range(2)))
    first = time.perf_counter() - t
    t = time.perf_counter()
    list(pool.map(abs, range(8)))
    later = time.perf_counter() - t
print(json.dumps({"import": imported, "first": first, "later": later}))
"""


RESULT_SIZE_SCRIPT = r"""
import json, pickle, sys, tempfile
from reportgen.pipeline.host_stage import HostTask, process_host
from reportgen.loaders.logdir import HostFile
path = sys.argv[1]
task = HostTask(index=0, run="run", host=HostFile(host="host", path=path, size=0))
with tempfile.TemporaryDirectory() as out:
    outcome = process_host(task, out)
sizes = {slug: len(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)) for slug, part in outcome.parts.items()}
print(json.dumps({"total": len(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)), "parts": sizes,
                  "error": outcome.error}))
"""


CAPACITY_SCRIPT = r"""
import json, os, sys, time
from concurrent.futures import ProcessPoolExecutor
import numpy as np

def spin(_=None):
    x = 0
    for i in range(20_000_000):
        x += i
    return x

def touch(_=None):  # fresh memory, first touch: what a decoder's arrays cost
    return float(np.ones(50_000_000).sum())

if __name__ == "__main__":
    n = os.cpu_count() or 1
    out = {}
    with ProcessPoolExecutor(n) as pool:
        list(pool.map(abs, range(n)))
        for f in (spin, touch):
            t = time.perf_counter()
            for _ in range(n):
                f()
            serial = time.perf_counter() - t
            t = time.perf_counter()
            list(pool.map(f, range(n)))
            out[f.__name__] = serial / (time.perf_counter() - t)
    print(json.dumps(out))
"""


def _tiler():
    """(tile function taking (bytes, copies), name) from bench/tile.py."""
    sys.path.insert(0, str(REPO))
    from bench import tile as full  # type: ignore[attr-defined]

    return (lambda data, copies: full.tile(data, copies, int(full.DEFAULT_GAP_US * 1e6))), "tile"


def tiled_logdir(out: Path, copies: int, hosts: int = 1) -> Path:
    """`out/logdirs/gpu_x<copies>[_h<hosts>]/plugins/profile/<run>/` with `hosts` host files."""
    tile, tiler = _tiler()
    tile_file = out / "tiles" / f"gpu_x{copies}.{tiler}.xplane.pb"
    if not tile_file.exists():
        tile_file.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        data = SOURCE.read_bytes() if copies == 1 else tile(SOURCE.read_bytes(), copies)
        tmp = tile_file.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(tile_file)
        print(f"  tiled ×{copies} with bench/{tiler}.py in {time.perf_counter() - started:.0f} s "
              f"({len(data) / 1e6:.0f} MB)", flush=True)
    name = f"gpu_x{copies}" + (f"_h{hosts}" if hosts > 1 else "")
    run = out / "logdirs" / name / "plugins" / "profile" / name
    run.mkdir(parents=True, exist_ok=True)
    for h in range(hosts):
        target = run / (f"host{h}.xplane.pb" if hosts > 1 else "host.xplane.pb")
        if not target.exists():
            try:
                os.link(tile_file, target)
            except OSError:
                shutil.copyfile(tile_file, target)
    return out / "logdirs" / name


_SUBREAPER = False


def _become_subreaper() -> None:
    """Adopt the orphans of measured commands (a fork server and its workers outlive the build's
    process for a moment), so that their CPU time and memory are counted with the command's."""
    global _SUBREAPER
    if _SUBREAPER or not sys.platform.startswith("linux"):
        return
    import ctypes

    _SUBREAPER = ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


def _reap_orphans() -> int:
    """Wait for every adopted process; the largest peak RSS (bytes) among them."""
    rss = 0
    while _SUBREAPER:
        try:
            _, _, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        rss = max(rss, usage.ru_maxrss * 1024)
    return rss


def run_measured(cmd: list[str], env: dict | None = None) -> tuple[subprocess.CompletedProcess, float, int, float]:
    """Run a command; (result, wall seconds, peak RSS in bytes of it and of every process it started,
    CPU seconds of all of them)."""
    _become_subreaper()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", rss_file.name, *cmd],
                              capture_output=True, text=True, cwd=CHECKOUT, env=env)
        wall = time.perf_counter() - started
        orphans = _reap_orphans()
        text = rss_file.read().strip().splitlines()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rss = int(text[-1]) * 1024 if text and text[-1].isdigit() else 0
    return done, wall, max(rss, orphans), cpu


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    # As installed by pip, whose install compiles the package's bytecode once: a checkout run with
    # PYTHONDONTWRITEBYTECODE would compile every module of reportgen again in every process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


TIMING_LINE = re.compile(r"^(?P<stage>.+?)\s{2,}(?P<seconds>\d+\.\d+)(?:\s+\S+%)?$")
SUMMARY_LINE = re.compile(r"(?P<events>[\d,]+) events in (?P<seconds>[\d.]+) s")
RSS_LINE = re.compile(r"peak RSS (?P<mib>[\d,]+) MiB")


def reportgen_build(logdir: Path, site: Path, jobs: int | None = None) -> dict:
    cmd = [sys.executable, "-m", "reportgen", "build", str(logdir), "-o", str(site), "--no-cache", "--timings"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    if MAX_MEMORY:
        cmd += ["--max-memory", MAX_MEMORY]
    done, wall, process_rss, cpu = run_measured(cmd, _env())
    if done.returncode != 0:
        raise RuntimeError(f"reportgen build failed ({done.returncode}):\n{done.stderr[-3000:]}")
    stages: dict[str, float] = {}
    total = None
    for line in done.stderr.splitlines():
        match = TIMING_LINE.match(line.strip())
        if match and match["stage"] != "stage":
            if match["stage"] == "total":
                total = float(match["seconds"])
            else:
                stages[match["stage"]] = float(match["seconds"])
    summary = SUMMARY_LINE.search(done.stdout)
    rss = RSS_LINE.search(done.stderr)
    return {
        "wall": wall,
        "cpu": cpu,
        "build": total,
        "stages": stages,
        "events": int(summary["events"].replace(",", "")) if summary else 0,
        # The larger of the process (and what it waited for) and the build's own figure (its workers).
        "rss": max(process_rss, int(rss["mib"].replace(",", "")) * 2**20 if rss else 0),
    }


def xprof_tools(python: str, host_file: Path) -> dict[str, dict]:
    results = {}
    for tool, params in XPROF_TOOLS.items():
        done, wall, _, cpu = run_measured([python, "-c", XPROF_SCRIPT, str(host_file), tool, json.dumps(params)])
        if done.returncode != 0:
            results[tool] = {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["wall"] = wall
        result["cpu"] = cpu
        results[tool] = result
    return results


def _print_stages(stages: dict[str, float], build: float) -> None:
    for stage, seconds in sorted(stages.items(), key=lambda item: -item[1]):
        if seconds >= 0.005:
            print(f"    {stage:<34} {seconds:8.3f} s  {seconds / build:6.1%}")


def _loads(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


def bench_size(copies: int, args, rows: list[dict]) -> None:
    logdir = tiled_logdir(args.out, copies)
    host_file = next((logdir / "plugins" / "profile").glob("*/host.xplane.pb"))
    size_mb = host_file.stat().st_size / 1e6
    load_before = os.getloadavg()
    ours = reportgen_build(logdir, args.out / "sites" / f"x{copies}")
    load = (load_before, os.getloadavg())
    print(f"\n×{copies}: {size_mb:.0f} MB, {ours['events']:,} events; load average (1, 5, 15 min) before "
          f"{_loads(load[0])}, after {_loads(load[1])}")
    print(f"  reportgen build: {ours['wall']:.2f} s process wall ({ours['build']:.2f} s in build_site, "
          f"{ours['cpu']:.2f} s of CPU), peak RSS {ours['rss'] / 2**30:.2f} GiB "
          f"({ours['rss'] / size_mb / 1e6:.2f} × the file); stages (host.* summed over hosts; assets run beside them):")
    _print_stages(ours["stages"], ours["build"])
    row = {"copies": copies, "events": ours["events"], "ours_wall": ours["wall"], "ours_build": ours["build"],
           "ours_cpu": ours["cpu"], "ours_rss": ours["rss"], "file_bytes": size_mb * 1e6, "stages": ours["stages"],
           "load": load}
    if args.xprof_python:
        tools = xprof_tools(args.xprof_python, host_file)
        row["xprof_load_after"] = os.getloadavg()
        print(f"  load average after XProf's tools {_loads(row['xprof_load_after'])}")
        ok = {t: r for t, r in tools.items() if "error" not in r}
        for tool, result in tools.items():
            if "error" in result:
                print(f"  XProf {tool:<26} failed: {result['error'][:200]}")
            else:
                print(f"  XProf {tool:<26} {result['seconds']:8.2f} s cold "
                      f"({result['wall']:.2f} s process wall, {result['cpu']:.2f} s of CPU), "
                      f"peak RSS {result['rss'] / 2**30:.2f} GiB")
        xprof_sum = sum(r["seconds"] for r in ok.values())
        xprof_wall = sum(r["wall"] for r in ok.values())
        xprof_cpu = sum(r["cpu"] for r in ok.values())
        xprof_rss = max((r["rss"] for r in ok.values()), default=0)
        print(f"  XProf summed ({len(ok)} tools): {xprof_sum:.2f} s in the tools, {xprof_wall:.2f} s of process wall, "
              f"{xprof_cpu:.2f} s of CPU, peak RSS {xprof_rss / 2**30:.2f} GiB")
        if xprof_sum:
            print(f"  ratio reportgen / XProf: build {ours['build']:.2f} / {xprof_sum:.2f} = "
                  f"{ours['build'] / xprof_sum:.3f}; process walls {ours['wall']:.2f} / {xprof_wall:.2f} = "
                  f"{ours['wall'] / xprof_wall:.3f} (targets: ≤ 0.2 at ×50, ≤ 0.1 at ×200); CPU "
                  f"{ours['cpu']:.2f} / {xprof_cpu:.2f} = {ours['cpu'] / xprof_cpu:.3f}")
        row.update(xprof_sum=xprof_sum, xprof_wall=xprof_wall, xprof_cpu=xprof_cpu, xprof_rss=xprof_rss,
                   xprof={t: r.get("seconds") for t, r in tools.items()})
    rows.append(row)


def bench_parallel(args) -> dict:
    cores = os.cpu_count() or 1
    logdir = tiled_logdir(args.out, args.parallel_tile, hosts=args.parallel_hosts)
    capacity_file = args.out / "capacity.py"
    capacity_file.parent.mkdir(parents=True, exist_ok=True)
    capacity_file.write_text(CAPACITY_SCRIPT)
    measured, *_ = run_measured([sys.executable, str(capacity_file)], _env())
    capacity = json.loads(measured.stdout.strip().splitlines()[-1]) if measured.returncode == 0 else None
    start, *_ = run_measured([sys.executable, "-c", POOL_START_SCRIPT], _env())
    pool = json.loads(start.stdout.strip().splitlines()[-1]) if start.returncode == 0 else None
    loads = [os.getloadavg()]
    serial = reportgen_build(logdir, args.out / "sites" / "parallel-j1", jobs=1)
    loads.append(os.getloadavg())
    parallel = reportgen_build(logdir, args.out / "sites" / f"parallel-j{cores}", jobs=cores)
    loads.append(os.getloadavg())
    print("\n  load average before --jobs 1, after it, after --jobs N: "
          + "; ".join(_loads(x) for x in loads))
    same = _same_site(args.out / "sites" / "parallel-j1", args.out / "sites" / f"parallel-j{cores}")
    host_file = next((logdir / "plugins" / "profile").glob("*/host0.xplane.pb"))
    sized, *_ = run_measured([sys.executable, "-c", RESULT_SIZE_SCRIPT, str(host_file)], _env())
    result_size = json.loads(sized.stdout.strip().splitlines()[-1]) if sized.returncode == 0 else None
    print(f"\n{args.parallel_hosts} host files (×{args.parallel_tile} each, {serial['events']:,} events), "
          f"{cores} cores:")
    if capacity:
        print(f"  this machine's parallel capacity ({cores} processes vs one, same work): pure Python "
              f"{capacity['spin']:.2f}×, fresh memory {capacity['touch']:.2f}× (a shared VM gives less than {cores}×)")
    if result_size:
        parts = ", ".join(f"{k} {v / 1e3:,.0f} kB" for k, v in sorted(result_size["parts"].items(),
                                                                        key=lambda kv: -kv[1]))
        print(f"  what travels back per host (pickled): {result_size['total'] / 1e6:.2f} MB for a "
              f"{host_file.stat().st_size / 1e6:.0f} MB host file ({parts})")
    if pool:
        print(f"  worker start-up (fork server: import reportgen, warm the decoder): first task after "
              f"{pool['first']:.2f} s, later tasks {pool['later'] * 1000 / 8:.1f} ms each")
    for label, result in (("--jobs 1", serial), (f"--jobs {cores}", parallel)):
        print(f"  {label:<9} build {result['build']:.2f} s (hosts stage {result['stages'].get('hosts', 0):.2f} s), "
              f"process wall {result['wall']:.2f} s, {result['cpu']:.2f} s of CPU, "
              f"peak RSS {result['rss'] / 2**30:.2f} GiB")
    hosts_1, hosts_n = serial["stages"].get("hosts", 0), parallel["stages"].get("hosts", 0)
    if hosts_n:
        whole = serial["build"] / parallel["build"]
        print(f"  speed-up: hosts stage {hosts_1 / hosts_n:.2f}×, whole build {whole:.2f}× "
              f"(ideal {cores}×); sites identical: {same}")
    return {"serial": serial, "parallel": parallel, "pool": pool, "same": same, "result_size": result_size,
            "capacity": capacity, "loads": loads}


def bench_sample(rounds: int) -> dict:
    """`reportgen build --no-cache` of the bundled sample, kernels compiled: the fixed costs of a build."""
    site = Path(tempfile.mkdtemp(prefix="reportgen-bench-sample-")) / "site"
    runs = []
    for _ in range(rounds):
        done, wall, rss, cpu = run_measured([sys.executable, "-m", "reportgen", "build", "-o", str(site),
                                             "--no-cache", "-q"], _env())
        if done.returncode != 0:
            raise RuntimeError(f"reportgen build failed ({done.returncode}):\n{done.stderr[-3000:]}")
        runs.append({"wall": wall, "cpu": cpu, "rss": rss, "load": os.getloadavg()[0]})
    shutil.rmtree(site.parent, ignore_errors=True)
    walls, cpus = sorted(r["wall"] for r in runs), sorted(r["cpu"] for r in runs)
    print(f"\nbundled sample, --no-cache rebuild ({rounds} runs): process wall median {walls[len(walls) // 2]:.2f} s "
          f"(best {walls[0]:.2f} s; target ≤ 1.5 s), CPU median {cpus[len(cpus) // 2]:.2f} s; load "
          + ", ".join(f"{r['load']:.1f}" for r in runs))
    return {"runs": runs}


def _same_site(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return files_a == files_b and all((a / f).read_bytes() == (b / f).read_bytes() for f in files_a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiles", default="10,50,200", help="sizes: copies of the GPU capture (default 10,50,200)")
    parser.add_argument("--xprof-python", default=DEFAULT_XPROF, help=f"XProf's Python (default {DEFAULT_XPROF})")
    parser.add_argument("--skip-xprof", action="store_true")
    parser.add_argument("--parallel-hosts", type=int, default=0, help="also build a run of this many host files")
    parser.add_argument("--parallel-tile", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--checkout", type=Path, default=REPO,
                        help="measure the reportgen of this checkout (default: this one)")
    parser.add_argument("--max-memory", default="", metavar="SIZE",
                        help="passed to reportgen build (its default budget refuses the largest tiles)")
    parser.add_argument("--sample", type=int, default=5, metavar="N",
                        help="also time N rebuilds of the bundled sample (default 5; 0: none)")
    args = parser.parse_args()
    global CHECKOUT, MAX_MEMORY
    CHECKOUT = args.checkout.resolve()
    MAX_MEMORY = args.max_memory
    if args.skip_xprof or not Path(args.xprof_python).exists():
        if not args.skip_xprof:
            print(f"XProf not found at {args.xprof_python}: reportgen only")
        args.xprof_python = None
    sizes = [int(s) for s in args.tiles.split(",") if s.strip()]
    print(f"capture: {SOURCE.name} tiled ×{', ×'.join(map(str, sizes))}; {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f}")
    # A first build compiles nothing later builds need (numba's cache), so no size pays for it.
    reportgen_build(tiled_logdir(args.out, 1), Path(tempfile.mkdtemp(prefix="reportgen-bench-warm-")) / "site")
    sample = bench_sample(args.sample) if args.sample else None
    rows: list[dict] = []
    for copies in sizes:
        bench_size(copies, args, rows)
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        print(f"\ntime per event, ×{first['copies']} → ×{last['copies']} (target: flat within 25%):")
        for key, label in (("ours_build", "build"), ("ours_wall", "process wall"), ("ours_cpu", "CPU")):
            a, b = first[key] / first["events"] * 1e6, last[key] / last["events"] * 1e6
            print(f"  {label:<13} {a:.3f} → {b:.3f} µs/event ({b / a:.2f}×)")
        print("  peak RSS per event: " + ", ".join(f"×{r['copies']} {r['ours_rss'] / r['events']:.0f} B "
                                                   f"({r['ours_rss'] / r['file_bytes']:.2f} × the file)"
                                                   for r in rows))
        stages = [s for s in last["stages"] if s in first["stages"] and last["stages"][s] >= 0.05]
        for stage in sorted(stages, key=lambda s: -last["stages"][s]):
            a = first["stages"][stage] / first["events"] * 1e6
            b = last["stages"][stage] / last["events"] * 1e6
            print(f"    {stage:<34} {a:.3f} → {b:.3f} µs/event ({b / a if a else float('inf'):.2f}×)")
    parallel = bench_parallel(args) if args.parallel_hosts else None
    if args.json:
        args.json.write_text(json.dumps({"sample": sample, "sizes": rows, "parallel": parallel}, indent=1))


if __name__ == "__main__":
    main()
