"""Many tiny hosts in one run: build time and peak memory against the host count.

    PYTHONPATH=. python bench/many_hosts.py [--hosts 1000,3000,10000] [--jobs N] [--out bench/out/many_hosts]
        [--real] [--keep] [--show] [--checkout ../main]

A TPU pod slice has hundreds to thousands of hosts, each one file of a run. For each count N it
writes N tiny XSpace hosts (`<run>/host_<i>.xplane.pb`, made with the tests' builder
`tests/xspace.py`: a `/host:CPU` plane, one `python` thread with a few TraceMe events and a step
marker; ≈ 300 bytes each, generated once into `--out` and reused) and runs, in a fresh process,
`reportgen build RUN -o SITE --no-cache --timings`, printing the process's wall time, its peak RSS
(of it and of its workers, from `/usr/bin/time`), the build's per-stage table, and at the end the
seconds and MiB per host of each count, and each stage's growth from the smallest count to the
largest against the host count's (a stage growing faster than the host count shows a ratio > 1).

`--real`: also 8 real hosts in one run (copies of the shared `gpu_multi_worker` host file, 3 MB,
8 GPU planes each).

The machine is shared and noisy: read the ratios of one run, not the seconds, and note the load.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "bench" / "out" / "many_hosts"
SHARED_PROFILE = REPO.parent / "shared/captures/logdir/plugins/profile"

sys.path.insert(0, str(REPO))


def tiny_host(index: int) -> bytes:
    """One tiny host: a `/host:CPU` plane with a `python` thread running two steps of a few TraceMes."""
    from tests.xspace import host_space

    space = host_space(f"host_{index}")
    line = space.host_plane().line(1, "python")
    for step in range(2):
        start = step * 10_000_000
        line.event("train_step", start, 9_000_000, step_num=step, _r=1)
        line.event("IteratorGetNext", start + 100_000, 2_000_000)
        line.event("forward", start + 2_200_000, 5_000_000)
    return space.serialize()


def make_run(folder: Path, hosts: int) -> Path:
    """`folder/run/host_<i>.xplane.pb` for i < hosts (made once; reused when complete)."""
    run = folder / "run"
    done = folder / "complete"
    if done.exists():
        return run
    run.mkdir(parents=True, exist_ok=True)
    for index in range(hosts):
        (run / f"host_{index}.xplane.pb").write_bytes(tiny_host(index))
    done.write_text(str(hosts))
    return run


def real_run(folder: Path, hosts: int = 8) -> Path | None:
    """`hosts` real hosts in one run: copies of the shared GPU capture's host file under distinct names
    (a multi-worker GPU job's hosts are alike in size and kind)."""
    source = SHARED_PROFILE / "gpu_multi_worker" / "34.83.195.179_6003.xplane.pb"
    if not source.is_file():
        return None
    run = folder / f"real_{hosts}" / "run"
    run.mkdir(parents=True, exist_ok=True)
    for index in range(hosts):
        target = run / f"worker_{index}.xplane.pb"
        if not target.exists():
            shutil.copyfile(source, target)
    return run


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run a command; (result, wall seconds, peak RSS in bytes of it or of a child it waited for)."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", rss_file.name, *cmd],
                              capture_output=True, text=True, env=env, cwd=cwd)
        wall = time.perf_counter() - started
        text = rss_file.read().strip().splitlines()
    rss = int(text[-1]) * 1024 if text and text[-1].isdigit() else 0
    return done, wall, rss


STAGE_LINE = re.compile(r"^(?P<stage>\S+)\s+(?P<seconds>[\d.]+)\s+[\d.]+%$")


def stages_of(output: str) -> dict[str, float]:
    """The per-stage table that `--timings` prints."""
    stages: dict[str, float] = {}
    for line in output.splitlines():
        match = STAGE_LINE.match(line.strip())
        if match:
            stages[match["stage"]] = float(match["seconds"])
    return stages


def build(run: Path, site: Path, jobs: int | None, checkout: Path = REPO) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    cmd = [sys.executable, "-m", "reportgen", "build", str(run), "-o", str(site), "--no-cache", "--timings", "-q"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    shutil.rmtree(site, ignore_errors=True)
    done, wall, rss = timed(cmd, env, cwd=checkout)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"build of {run} failed with exit {done.returncode}")
    return {"wall": wall, "rss": rss, "stages": stages_of(done.stdout + done.stderr), "output": done.stderr}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1000,3000,10000")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--real", action="store_true", help="also 8 real GPU hosts in one run")
    parser.add_argument("--keep", action="store_true", help="keep the sites")
    parser.add_argument("--show", action="store_true", help="print each build's per-stage table")
    parser.add_argument("--checkout", type=Path, default=REPO,
                        help="build with this checkout's reportgen (e.g. another worktree, to compare)")
    args = parser.parse_args()

    counts = [int(text) for text in args.hosts.split(",") if text]
    results: dict[str, dict] = {}
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}")
    for count in counts:
        run = make_run(args.out / f"hosts_{count}", count)
        result = build(run, args.out / f"site_{count}", args.jobs, args.checkout)
        results[str(count)] = result
        print(f"{count:>6} hosts: {result['wall']:7.1f} s, peak RSS {result['rss'] / 2**20:7.0f} MiB, "
              f"{1000 * result['wall'] / count:6.1f} ms and {result['rss'] / 2**10 / count:7.1f} KiB per host "
              f"(load {open('/proc/loadavg').read().split()[0]})")
        if args.show:
            print(result["output"])
        if not args.keep:
            shutil.rmtree(args.out / f"site_{count}", ignore_errors=True)
    if args.real:
        run = real_run(args.out)
        if run is not None:
            result = build(run, args.out / "site_real", args.jobs, args.checkout)
            hosts = len(list(run.glob("*.xplane.pb")))
            print(f"real run ({hosts} hosts): {result['wall']:.1f} s, peak RSS {result['rss'] / 2**20:.0f} MiB")
            if args.show:
                print(result["output"])
            shutil.rmtree(args.out / "site_real", ignore_errors=True)

    if len(counts) >= 2:
        small, large = str(counts[0]), str(counts[-1])
        factor = counts[-1] / counts[0]
        print(f"\nstage growth {small} → {large} hosts, as a multiple of the host count's ×{factor:g} "
              f"(> 1: faster than the host count)")
        first, last = results[small]["stages"], results[large]["stages"]
        rows = sorted(last, key=lambda stage: -last[stage])
        for stage in rows:
            if last[stage] < 0.2:
                continue
            base = first.get(stage, 0.0)
            ratio = (last[stage] / base) / factor if base > 0.01 else float("nan")
            print(f"  {stage:<32} {base:8.2f} s → {last[stage]:8.2f} s   ×{ratio:5.2f}")


if __name__ == "__main__":
    main()
