"""A machine's first build against a warm one: what compiling the kernels costs.

    PYTHONPATH=. python bench/first_run.py [--rounds 3] [--jobs N]

Each round, in fresh processes and in this order: `reportgen build` of the
bundled sample with an empty user cache (XDG_CACHE_HOME and NUMBA_CACHE_DIR
set to a new folder: every kernel compiles and
Jinja compiles the templates), then the same `reportgen build --no-cache`
twice with that cache now filled (the per-host rebuild cache is off, so every
host is decoded and every page written again). It prints each
run's process wall and CPU time and the cold / warm ratio of each round (the
target: ≤ 3, and ≤ 15 s cold on 2 cores). Rounds interleave cold and warm runs
so that load from elsewhere on a shared machine falls on both; read the ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHECKOUT = REPO  # the checkout whose reportgen is measured (`--checkout`)


def _run(cache_dir: str, site: str, jobs: int | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one build."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir + "/kernels", "XDG_CACHE_HOME": cache_dir,
           "PYTHONPATH": str(CHECKOUT)}
    # As installed by pip, whose install compiles the package's bytecode once: a checkout run with
    # PYTHONDONTWRITEBYTECODE would compile every module of reportgen again in every process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "reportgen", "build", "-o", site, "--no-cache", "-q"]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, cwd=CHECKOUT)  # `-m` imports from the working folder first
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="passed to reportgen build (default: its own)")
    parser.add_argument("--checkout", type=Path, default=REPO,
                        help="measure the reportgen of this checkout (default: this one)")
    args = parser.parse_args()
    global CHECKOUT
    CHECKOUT = args.checkout.resolve()
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f} at start")
    ratios, colds, warms = [], [], []
    for round_ in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="reportgen-first-run-") as scratch:
            cache, site = str(Path(scratch) / "kernels"), str(Path(scratch) / "site")
            cold = _run(cache, site, args.jobs)
            warm = [_run(cache, site, args.jobs) for _ in range(2)]
        best_warm = min(w for w, _ in warm)
        ratios.append(cold[0] / best_warm)
        colds.append(cold[0])
        warms.append(best_warm)
        print(f"round {round_}: cold {cold[0]:.2f} s wall ({cold[1]:.2f} s CPU), warm "
              + ", ".join(f"{w:.2f} s ({c:.2f} s CPU)" for w, c in warm)
              + f" → cold / warm {ratios[-1]:.2f}; load {os.getloadavg()[0]:.2f}")
    print(f"median: cold {statistics.median(colds):.2f} s, warm {statistics.median(warms):.2f} s, "
          f"cold / warm {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
