"""Synthetic profile histories made from one real built run: copies of its summary.json block and CSV tables
with its step time set per run (injected changes of known size at known runs, plus Gaussian noise).

A change of `d` ms per step is put where a real slowdown would show: every step of steps.csv gets `d` more (so
the run's steps average what its summary block says), the host-compute category and one op of the TF stats
table take it (`MOVED_OP`, `d` × steps more self time), so that a trend must find both the change and the op.
Runs are named after a nightly capture time (TensorBoard's `YYYY_MM_DD_HH_MM_SS`), one day apart.
"""

from __future__ import annotations

import copy
import csv
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from reportgen.output.transaction import write_marker

START = datetime(2026, 1, 1, 2, 0, 0, tzinfo=timezone.utc)
COPIED = ("index.html", "data/overview/steps.csv", "data/tf_stats/framework_op_stats.csv",
          "data/input_pipeline/tf_data_iterators.csv")


def run_name(index: int, prefix: str = "nightly_") -> str:
    return f"{prefix}{START + timedelta(days=index):%Y_%m_%d_%H_%M_%S}"


def _rewrite_csv(text: str, change) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    head, body = rows[0], rows[1:]
    body = [change(dict(zip(head, row))) for row in body]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(head)
    writer.writerows([[row[h] for h in head] for row in body])
    return out.getvalue()


def moved_op(source_site: Path, source_run: str) -> str:
    """The op a change is put on: the run's busiest host op (the TF stats table's first non-IDLE row)."""
    text = (source_site / source_run / "data/tf_stats/framework_op_stats.csv").read_text(encoding="utf-8")
    for row in csv.DictReader(io.StringIO(text)):
        if row["Operation Type"] != "IDLE":
            return row["Operation Name"]
    raise AssertionError("the source run has no op")


def make_series(source_site: Path, source_run: str, dest: Path, count: int, *, changes: dict[int, float] | None = None,
                noise_ms: float = 0.0, seed: int = 0, prefix: str = "nightly_", first: int = 0,
                edit=None) -> list[float]:
    """Write a site of `count` runs at `dest`; returns each run's average step time (ms).

    `changes`: run index → step-time change (ms) from that run on; `edit(index, block)` may alter a run's
    summary block (e.g. make one run's program different)."""
    src_summary = json.loads((source_site / "summary.json").read_text(encoding="utf-8"))
    block = src_summary["runs"][source_run]
    base = block["overview"]["step_time_ms"]["average"]
    steps = block["overview"]["steps"]
    op = moved_op(source_site, source_run)
    texts = {rel: (source_site / source_run / rel).read_text(encoding="utf-8") for rel in COPIED
             if (source_site / source_run / rel).is_file()}
    rng = np.random.default_rng(seed)
    changes = changes or {}
    runs, averages = {}, []
    for i in range(count):
        index = first + i
        shift = sum(d for at, d in changes.items() if index >= at) + (rng.normal(0.0, noise_ms) if noise_ms else 0.0)
        name = run_name(index, prefix)
        run_block = copy.deepcopy(block)
        run_block["tools"] = {slug: {**tool, "page": f"{name}/{tool['page'].rsplit('/', 1)[-1]}"}
                              for slug, tool in block["tools"].items()}
        overview = run_block["overview"]
        for key in ("average", "minimum", "maximum"):
            overview["step_time_ms"][key] += shift
        overview["breakdown_ms"]["host_compute"] += shift
        if edit is not None:
            edit(index, run_block)
        runs[name] = run_block
        averages.append(base + shift)
        folder = dest / name
        for rel, text in texts.items():
            if rel.endswith("steps.csv"):
                text = _rewrite_csv(text, lambda r, s=shift: {
                    **r, "Step time (ms)": repr(float(r["Step time (ms)"]) + s),
                    "Host compute (ms)": repr(float(r["Host compute (ms)"]) + s)})
            elif rel.endswith("framework_op_stats.csv"):
                def more(r, s=shift):
                    if r["Operation Name"] == op:
                        added = s * steps * 1e3
                        for column in ("Total self-time (us)", "Total time (us)"):
                            r = {**r, column: repr(float(r[column]) + added)}
                    return r
                text = _rewrite_csv(text, more)
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        # The tool pages as stand-ins (the real ones weigh 600 KiB a run): links to them must resolve.
        for tool in run_block["tools"].values():
            (dest / tool["page"]).write_text(f"<!doctype html><title>{tool['page']}</title>", encoding="utf-8")
    dest.mkdir(parents=True, exist_ok=True)
    summary = {**src_summary, "runs": runs, "errors": []}
    (dest / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    # The source's index stands in for the site's own (its links are the source's): pages link to it.
    (dest / "index.html").write_bytes((source_site / "index.html").read_bytes())
    write_marker(dest)  # a site as reportgen writes one: pages may be added to it
    return averages

