"""Benchmark: decoded capture → overview and TF stats data, against XProf.

    python bench/core.py [--copies 200] [--xprof-python /tmp/xprofvenv/bin/python]

Tiles the GPU capture (gpu_multi_worker, one host) `--copies` times, then in
fresh processes on the same file times

* reportgen: read + decode + core (`compute_host_op_stats`) + the overview
  and TF stats page data (`overview_view`, `tf_stats_view`);
* XProf (when its Python is given): `overview_page` and `framework_op_stats`,
  each cold in its own process on a temporary copy (XProf writes cache files
  beside its inputs), as in shared/captures/README.md.

and prints the seconds and the ratio reportgen / (XProf overview + TF stats).
Captures are tiled with bench/tile.py.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO.parent / "shared/captures/logdir/plugins/profile/gpu_multi_worker/34.83.195.179_6003.xplane.pb"

OURS = r"""
import sys, time, json
t0 = time.perf_counter()
from reportgen.loaders.xspace import decode_xspace
from reportgen.core.ops.op_stats import compute_host_op_stats
from reportgen.loaders.hlo import hlo_modules
from reportgen.core.tools.overview import overview_view
from reportgen.core.tools.tf_stats import tf_stats_view
from reportgen.core.ops.views import run_views
t_import = time.perf_counter()
c_import = time.process_time()
path = sys.argv[1]
with open(path, "rb") as f:
    data = f.read()
capture = decode_xspace(path, data, host="host")
t_decode = time.perf_counter()
stats = compute_host_op_stats(capture, hlo_modules(capture))
t_core = time.perf_counter()
overview = overview_view("host", run_views({"host": stats}, ["host"], overview_steps=True)["host"])
tf = tf_stats_view("host", run_views({"host": stats}, ["host"], overview_steps=False)["host"])
t_pages = time.perf_counter()
print(json.dumps({"import": t_import - t0, "decode": t_decode - t_import, "core": t_core - t_decode,
                  "pages": t_pages - t_core, "total": t_pages - t_import, "cpu": time.process_time() - c_import,
                  "events": len(capture.events),
                  "steps": len(overview.steps), "tf_rows": len(tf.with_idle)}))
"""

XPROF = r"""
import sys, time, json, shutil, tempfile, os
from xprof.convert import raw_to_tool_data as r
src, tool = sys.argv[1], sys.argv[2]
folder = tempfile.mkdtemp()
path = os.path.join(folder, os.path.basename(src))
shutil.copy(src, path)
t = time.perf_counter()
c = time.process_time()
r.xspace_to_tool_names([path])
data, _ = r.xspace_to_tool_data([path], tool, {"use_saved_result": False})
seconds = time.perf_counter() - t
cpu = time.process_time() - c
doc = json.loads(data)
shutil.rmtree(folder, ignore_errors=True)
out = {"seconds": seconds, "cpu": cpu}
if tool == "overview_page":
    out["steps"] = len(doc[1]["rows"])
else:
    out["tf_rows"] = len(doc[0]["rows"])
print(json.dumps(out))
"""


def tiled(copies: int, cache: Path) -> Path:
    out = cache / f"gpu_x{copies}.xplane.pb"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(REPO / "bench" / "tile.py"), str(SOURCE), str(copies), "-o", str(out)]
    subprocess.run(cmd, check=True)
    return out


def run_json(python: str, code: str, *args: str) -> dict:
    started = time.perf_counter()
    proc = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=200)
    parser.add_argument("--xprof-python", default="/tmp/xprofvenv/bin/python")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "reportgen-bench"))
    args = parser.parse_args()
    path = tiled(args.copies, Path(args.cache))
    print(f"capture: {path} ({path.stat().st_size / 1e6:.0f} MB, ×{args.copies})")
    # Warm the numba cache once so that a compile is not charged to the measured run.
    run_json(sys.executable, OURS, str(SOURCE))
    ours = run_json(sys.executable, OURS, str(path))
    print("reportgen: " + ", ".join(f"{k} {v:.2f} s" for k, v in ours.items() if isinstance(v, float)) +
          f"; {ours['events']:,} events, {ours['steps']} steps, {ours['tf_rows']} TF stats rows")
    if not Path(args.xprof_python).exists():
        print("XProf not available (pass --xprof-python); no ratio")
        return
    xp_overview = run_json(args.xprof_python, XPROF, str(path), "overview_page")
    xp_tf = run_json(args.xprof_python, XPROF, str(path), "framework_op_stats")
    xprof_sum = xp_overview["seconds"] + xp_tf["seconds"]
    xprof_cpu = xp_overview["cpu"] + xp_tf["cpu"]
    print(f"XProf: overview_page {xp_overview['seconds']:.2f} s ({xp_overview['cpu']:.2f} s CPU, "
          f"{xp_overview['steps']} steps), framework_op_stats {xp_tf['seconds']:.2f} s ({xp_tf['cpu']:.2f} s CPU, "
          f"{xp_tf['tf_rows']} rows); sum {xprof_sum:.2f} s ({xprof_cpu:.2f} s CPU)")
    print(f"ratio reportgen / XProf, wall: {ours['total']:.2f} / {xprof_sum:.2f} = {ours['total'] / xprof_sum:.3f}; "
          f"CPU: {ours['cpu']:.2f} / {xprof_cpu:.2f} = {ours['cpu'] / xprof_cpu:.3f} (target ≤ 0.3)")
    without_decode = ours["core"] + ours["pages"]
    print(f"without decode (core + pages): {without_decode:.2f} s wall = {without_decode / xprof_sum:.3f} of XProf")


if __name__ == "__main__":
    main()
