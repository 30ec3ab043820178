"""Output equivalence of two checkouts: build the same inputs with each, compare the trees file by file.

    python scripts/site_diff.py build CHECKOUT OUT [--python PY] [--extra LOGDIR ...]
    python scripts/site_diff.py compare BEFORE AFTER

`build` runs CHECKOUT's reportgen (``python -m reportgen`` with CHECKOUT as the
working folder, so its own package is imported whatever is installed) with
fixed options (``--no-cache --jobs 1``) on:

* the bundled sample (no LOGDIR), plus ``--single-file``;
* every run of the shared logdir (``../shared/captures/logdir``, or
  ``$REPORTGEN_SHARED/captures/logdir``), once as Chrome JSON and once with
  ``--trace-format both`` (Perfetto too);
* the older-format captures (``captures/legacy``);
* each ``--extra LOGDIR`` (e.g. hand-made older timelines), with ``--trace-format both``;
* ``compare`` of the sample's two runs into its site, and ``summary`` of it
  (Markdown with its PNG charts, and JSON).

Each command's exit status goes to ``OUT/exit-status.json``. `compare` walks
two such trees and reports every file that is missing on one side or differs.
Gzip files whose bytes differ are compared again decompressed (a different
deflate implementation may legitimately encode the same content in other
bytes); such files are listed separately and count as equal. The exit status
is 0 when the trees are equivalent, 1 otherwise.

Slow (minutes per checkout on two cores): it is a script to run around a
refactoring, not a test.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK = Path(tempfile.gettempdir()) / "reportgen-site-diff-build"


def _shared() -> Path:
    return Path(os.environ.get("REPORTGEN_SHARED", REPO.parent / "shared"))


def _commands(out: Path, extras: list[str]) -> dict[str, list[str]]:
    captures = _shared() / "captures"
    fixed = ["--no-cache", "--jobs", "1", "-q"]
    sample = str(out / "sample")
    commands = {
        "sample": ["build", "-o", sample, "--single-file", str(out / "sample.html"), *fixed],
        "shared": ["build", str(captures / "logdir"), "-o", str(out / "shared"), *fixed],
        "shared-both": ["build", str(captures / "logdir"), "-o", str(out / "shared-both"),
                        "--trace-format", "both", *fixed],
        "legacy": ["build", str(captures / "legacy"), "-o", str(out / "legacy"), *fixed],
        "compare": ["compare", f"{sample}:tf_keras_input_bound", f"{sample}:tf_keras_fast", "-q", "--jobs", "1"],
        "summary-md": ["summary", sample, "--compare", "tf_keras_input_bound", "tf_keras_fast",
                       "-o", str(out / "summary" / "pr.md"), "--jobs", "1"],
        "summary-json": ["summary", sample, "--format", "json", "-o", str(out / "summary" / "pr.json"),
                         "--jobs", "1"],
    }
    for i, extra in enumerate(extras):
        commands[f"extra-{i}"] = ["build", extra, "-o", str(out / f"extra-{i}"), "--trace-format", "both", *fixed]
    return commands


def build(checkout: Path, out: Path, python: str, extras: list[str]) -> int:
    # Every checkout builds into the same folder (then moved to OUT), so that paths the outputs
    # quote (the summary's site path, a comparison's links) are the same on both sides. Two builds
    # at once would empty that folder under each other: the second waits for the first.
    with open(WORK.with_name(WORK.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(checkout, out, python, extras)


def _build(checkout: Path, out: Path, python: str, extras: list[str]) -> int:
    work = WORK
    for folder in (work, out):
        if folder.exists():
            shutil.rmtree(folder)
    (work / "summary").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    statuses = {}
    for name, args in _commands(work, [str(Path(e).resolve()) for e in extras]).items():
        done = subprocess.run([python, "-m", "reportgen", *args], cwd=checkout, env=env,
                              capture_output=True, text=True)
        statuses[name] = done.returncode
        (work / f"{name}.stderr").write_text(done.stderr)
        print(f"{name}: exit {done.returncode}", file=sys.stderr)
    (work / "exit-status.json").write_text(json.dumps(statuses, indent=1, sort_keys=True) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(work, out)
    return 0


def _files(root: Path) -> set[str]:
    # Stderr carries build seconds, and an output folder's lock file (`.DIR.lock`) the building
    # process's id: only the exit statuses are compared.
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and p.suffix not in (".stderr", ".lock")}


def _first_difference(a: bytes, b: bytes, context: int) -> str:
    """Where two texts first part ways, with `context` characters around it on each side."""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lo = max(0, at - context)
    return (f"    at byte {at}:\n    before: {a[lo:at + context].decode(errors='replace')!r}\n"
            f"    after:  {b[lo:at + context].decode(errors='replace')!r}")


def compare(before: Path, after: Path, show: int = 0) -> int:
    left, right = _files(before), _files(after)
    missing, extra = sorted(left - right), sorted(right - left)
    differ, gzip_only = [], []
    for rel in sorted(left & right):
        a, b = (before / rel).read_bytes(), (after / rel).read_bytes()
        if a == b:
            continue
        if rel.endswith(".gz") and gzip.decompress(a) == gzip.decompress(b):
            gzip_only.append(rel)
        else:
            differ.append(rel)
            if show and not rel.endswith((".gz", ".png", ".pftrace")):
                print(f"differ: {rel}\n{_first_difference(a, b, show)}")
    for label, paths in (("only in before", missing), ("only in after", extra), ("differ", differ),
                         ("gzip bytes differ, content equal", gzip_only)):
        for rel in paths:
            print(f"{label}: {rel}")
    compared = len(left & right)
    print(f"{compared} files compared, {len(differ)} differ, {len(missing)} only in before, "
          f"{len(extra)} only in after, {len(gzip_only)} gzip files equal once decompressed")
    return 0 if not (missing or extra or differ) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("checkout", type=Path)
    b.add_argument("out", type=Path)
    b.add_argument("--python", default=sys.executable)
    b.add_argument("--extra", action="append", default=[], metavar="LOGDIR")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--show", type=int, default=0, metavar="CHARS",
                   help="print where each differing text file first differs, with CHARS of context")
    args = parser.parse_args()
    if args.command == "build":
        return build(args.checkout.resolve(), args.out, args.python, args.extra)
    return compare(args.before, args.after, args.show)


if __name__ == "__main__":
    sys.exit(main())
