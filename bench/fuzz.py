"""Structure-aware fuzzing of the XSpace decoder and the host stage, for long runs.

    PYTHONPATH=. python bench/fuzz.py [-n 10000] [--seed 1] [--jobs 2] [--build-every 20] [--shared] [--log F]

Each case is a seed capture with a few fields changed through protobuf (`tests/fuzzing.py`), the HLO
modules of its `/host:metadata` plane among them (shapes, layouts, links, sizes, instruction counts): the bundled
sample cut to a few events per line, captures built in code and, with `--shared`, the shared captures
(../shared/captures) cut the same way. Cases run in `--jobs` child processes; every `--build-every`-th case
goes through a whole build (combine and render) instead of the host stage alone. A case passes when it
builds or fails with an input error naming the file; an "internal error", a traceback or warning on
stderr, or a crashed child (its last case started is the culprit) is a finding. Prints the counts, each
distinct finding once with a case that shows it (rerun it with `--only N`), and exits 1 on any finding.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "captures" / "logdir" / "plugins" / "profile"
SHARED_SEEDS = ["gpu_multi_worker/34.83.195.179_6003.xplane.pb", "tpu_inference_2/tpu_inference_2.xplane.pb",
                "jax_mlp/vm.xplane.pb"]


class _Results(list):
    """The cases' outcomes; each is also written to the log file, when there is one, as it arrives."""

    def __init__(self, log: Path | None) -> None:
        super().__init__()
        self._log = log.open("a", encoding="utf-8") if log else None
        self._lock = threading.Lock()

    def append(self, record: dict) -> None:
        with self._lock:
            super().append(record)
            if self._log:
                self._log.write(json.dumps(record) + "\n")
                self._log.flush()


def _run_range(base: int, start: int, stop: int, every: int, extra: list[str], results: list, stderr: list) -> None:
    """Cases start..stop-1 in child processes: a child that dies is replaced after its last case."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    while start < stop:
        child = subprocess.Popen([sys.executable, "-m", "tests.fuzzing", "worker", str(base), str(start), str(stop),
                                  str(every), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 cwd=REPO, env=env)
        errors: list[str] = []
        reader = threading.Thread(target=errors.extend, args=(child.stderr,), daemon=True)
        reader.start()
        started = None
        for line in child.stdout:
            record = json.loads(line)
            if "start" in record:
                started = record["start"]
                continue
            results.append(record)
            started = None
            start = record["case"] + 1
        child.wait()
        reader.join()
        if errors:
            stderr.append("".join(errors))
        if child.returncode != 0 or started is not None:
            crashed = started if started is not None else start
            results.append({"case": crashed, "outcome": "crash", "build": False,
                            "message": f"the process ended with status {child.returncode}", "mutations": []})
            start = crashed + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=10_000, help="cases (default 10,000)")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--build-every", type=int, default=20, help="every Nth case is a whole build (0: none)")
    parser.add_argument("--shared", action="store_true", help="also the shared captures as seeds")
    parser.add_argument("--only", type=int, help="run this one case and show its outcome")
    parser.add_argument("--log", type=Path, help="append each case's outcome to this JSON-lines file as it ends")
    args = parser.parse_args(argv)
    extra = [str(SHARED / s) for s in SHARED_SEEDS] if args.shared and SHARED.exists() else []
    results = _Results(args.log)
    stderr: list[str] = []
    started = time.perf_counter()
    if args.only is not None:
        _run_range(args.seed, args.only, args.only + 1, args.build_every, extra, results, stderr)
    else:
        step = -(-args.n // max(1, args.jobs))
        threads = [threading.Thread(target=_run_range, args=(args.seed, lo, min(lo + step, args.n), args.build_every,
                                                             extra, results, stderr))
                   for lo in range(0, args.n, step)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    seconds = time.perf_counter() - started
    counts = collections.Counter(r["outcome"] for r in results)
    builds = sum(1 for r in results if r.get("build"))
    print(f"{len(results):,} cases ({builds:,} whole builds) in {seconds:.0f} s, seed {args.seed}: "
          + ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items())))
    findings: dict[str, dict] = {}
    for r in sorted(results, key=lambda r: r["case"]):
        if r["outcome"] in ("internal error", "crash"):
            key = (r["message"] or "").split("internal error while processing this host:")[-1][:200]
            findings.setdefault(key, r)
    messages = collections.Counter((r["message"] or "").split(": ", 1)[-1][:90] for r in results
                                   if r["outcome"] == "input error")
    if messages:
        print("input errors, by message:")
        for message, n in messages.most_common(12):
            print(f"  {n:6,}  {message}")
    for key, r in findings.items():
        print(f"FINDING (case {r['case']}, {r.get('seed')}): {key}\n    mutations: {r['mutations']}")
    noise = [text for text in stderr if text.strip()]
    for text in noise[:5]:
        print("STDERR:", text[:2000])
    return 1 if findings or noise else 0


if __name__ == "__main__":
    sys.exit(main())
