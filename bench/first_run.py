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

Builds run as the README's quick start runs them: the installed command, from
the clone's root. The checkout's package is copied once into a folder of its
own with its bytecode compiled (what `pip install .` does), a launcher script
outside the sources starts the build (as the `reportgen` command does, which
does not put the current folder on the module path), and the current folder is
the checkout, which holds another copy of the sources. A child process that
imported the sources of the current folder instead of the installed ones
compiled kernels the build never used (fixed in reportgen/kernels.py): run with
`-m` from the checkout, this benchmark could not see it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHECKOUT = REPO  # the checkout whose reportgen is measured (`--checkout`)


def _install(folder: Path) -> tuple[Path, Path]:
    """(the folder the checkout's package is installed into, the launcher script), as the module docstring says."""
    packages = folder / "site-packages"
    shutil.copytree(CHECKOUT / "reportgen", packages / "reportgen", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(packages)], check=True)
    launcher = folder / "bin" / "reportgen"
    launcher.parent.mkdir()
    launcher.write_text("from reportgen.cli.main import entry\n\nentry()\n", encoding="utf-8")
    return packages, launcher


def _run(installed: tuple[Path, Path], cache_dir: str, site: str, jobs: int | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one build."""
    packages, launcher = installed
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir + "/kernels", "XDG_CACHE_HOME": cache_dir,
           "PYTHONPATH": str(packages)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the installed bytecode is read, as pip leaves it
    command = [sys.executable, str(launcher), "build", "-o", site, "--no-cache", "-q"]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, cwd=CHECKOUT)  # from the clone's root, as the README runs it
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
    with tempfile.TemporaryDirectory(prefix="reportgen-installed-") as install_folder:
        installed = _install(Path(install_folder))
        for round_ in range(1, args.rounds + 1):
            with tempfile.TemporaryDirectory(prefix="reportgen-first-run-") as scratch:
                cache, site = str(Path(scratch) / "kernels"), str(Path(scratch) / "site")
                cold = _run(installed, cache, site, args.jobs)
                warm = [_run(installed, cache, site, args.jobs) for _ in range(2)]
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
