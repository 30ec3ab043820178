"""Writing a comparison: `compare/<a>--vs--<b>.html`, its JSON and CSVs, and the
"Comparisons" block of the site index.

When both runs come from the site the page is written into, the page links
to their pages and the site index lists the comparison; only that block of
`index.html` is rewritten. Otherwise the output folder holds the comparison
pages alone, with an index of its own.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from reportgen.compare import charts
from reportgen.compare.model import Comparison
from reportgen.compare.welch import ALPHA
from reportgen.names import joined_file_name

# The site's template environment renders the index block alone (no page around it).
from reportgen.output.site import PageWriter, _environment, write_assets
from reportgen.output.transaction import OutputNotASiteError, is_site_or_empty
from reportgen.summary_blocks import InputBottleneck

FOLDER = "compare"
MANIFEST = "comparisons.json"
SITE_SUMMARY = "summary.json"
TOP_ROWS = 20  # op and kernel rows per table on the page (the CSVs hold them all)
# The index's "Comparisons" block lies between two inert, empty <template> elements.
INDEX_BLOCK = re.compile(
    r'(<template id="comparisons-start"></template>).*?(<template id="comparisons-end"></template>)', re.S)


def page_stem(baseline: str, candidate: str) -> str:
    """`BASELINE--vs--CANDIDATE`, one name per pair of runs (`x y` and `x_y` are two), with room for the
    longest name written from it (`<stem>.html`, `.json`)."""
    return joined_file_name([baseline, candidate], "--vs--", room=len(".html"))


@dataclass
class WrittenComparison:
    page: Path
    json: Path
    in_site: bool  # the runs' own site: run pages linked, site index updated
    index_updated: bool


def _check_output(output: Path) -> None:
    if is_site_or_empty(output) or (output / FOLDER / MANIFEST).is_file():
        return
    raise OutputNotASiteError(
        f"{output}: exists and is neither a reportgen site nor a folder of comparisons; "
        "choose an empty or new output folder")


def _run_links(comparison: Comparison, in_site: bool) -> dict:
    """Relative links from the compare folder to each run's pages, when they are in this site."""
    links = {}
    for role, run in (("baseline", comparison.baseline), ("candidate", comparison.candidate)):
        if not in_site:
            links[role] = {}
            continue
        base = "../" + quote(run.folder) + "/"
        tools = {slug: base + quote(info.page.rsplit("/", 1)[-1])
                 for slug, info in run.summary.tools.items() if info.page}
        links[role] = {"index": base + "index.html", **tools}
    return links


def _table(frame: pd.DataFrame, value: str, top: int) -> dict:
    """The first `top` rows, with the compared value named baseline_us / candidate_us and
    missing relative changes as None."""
    shown = frame.head(top).rename(columns={f"{value}_baseline": "baseline_us", f"{value}_candidate": "candidate_us"})
    shown = shown.astype(object).where(shown.notna(), None)
    return {"rows": shown.to_dict("records"), "total": len(frame), "shown": len(shown)}


def _input_rows(comparison: Comparison) -> list[dict]:
    ip = comparison.input_pipeline
    a, b = ip.baseline_bottleneck, ip.candidate_bottleneck

    def figure(bottleneck: InputBottleneck | None, name: str) -> str | float | None:
        return getattr(bottleneck, name) if bottleneck is not None else None

    return [
        {"key": "input_bound", "label": "Input-bound (XProf)", "unit": "text",
         "baseline": comparison.classification[0], "candidate": comparison.classification[1]},
        {"key": "bottleneck", "label": "tf.data bottleneck iterator", "unit": "text",
         "baseline": figure(a, "iterator"), "candidate": figure(b, "iterator")},
        {"key": "bottleneck_latency_ms", "label": "its self time in the slowest execution", "unit": "ms",
         "baseline": figure(a, "latency_ms"), "candidate": figure(b, "latency_ms")},
        {"key": "bottleneck_self_time_ms", "label": "its self time over the capture", "unit": "ms",
         "baseline": figure(a, "self_time_ms"), "candidate": figure(b, "self_time_ms")},
        {"key": "largest_stage", "label": "Largest host input stage", "unit": "text",
         "baseline": ip.baseline_stage, "candidate": ip.candidate_stage},
    ]


def _page_context(comparison: Comparison, stem: str, in_site: bool) -> dict:
    ops = comparison.ops
    sides = []
    for side in ("Device", "Host"):
        frame = ops[ops["side"] == side]
        if len(frame):
            sides.append({"side": side, "chart": charts.op_change_chart(comparison, side),
                          "table": _table(frame, "self_us", TOP_ROWS), "id": f"ops-{side.lower()}"})
    kernels = None
    if comparison.kernels is not None:
        kernels = {"chart": charts.kernel_change_chart(comparison),
                   "table": _table(comparison.kernels, "total_us", TOP_ROWS)}
    step = comparison.step_time
    return {
        "c": comparison,
        "stem": stem,
        "links": _run_links(comparison, in_site),
        "in_site": in_site,
        "verdict": {
            "direction": "faster" if (step.delta or 0) < 0 else "slower" if (step.delta or 0) > 0 else "same",
            "significant": comparison.test.significant,
        },
        "alpha": ALPHA,
        "step_like": comparison.typical_step_ms,  # per-step figures in its unit (µs for microbenchmarks)
        "breakdown_chart": charts.breakdown_chart(comparison),
        "steps_chart": charts.step_times_chart(comparison),
        "op_sides": sides,
        "input_rows": _input_rows(comparison),
        "kernels": kernels,
        "data": {"json": f"{stem}.json", "ops": f"data/{stem}/tf_ops.csv",
                 "kernels": f"data/{stem}/kernels.csv" if kernels else None},
        "top_rows": TOP_ROWS,
    }


OP_CSV_COLUMNS = {
    "side": "Host/device", "type": "Operation Type", "name": "Operation Name",
    "self_us_baseline": "Baseline total self-time (us)", "self_us_candidate": "Candidate total self-time (us)",
    "delta_us": "Change (us)", "delta_percent": "Change (%)",
    "occurrences_baseline": "Baseline #Occurrences", "occurrences_candidate": "Candidate #Occurrences",
    "status": "Status",
}
KERNEL_CSV_COLUMNS = {
    "kernel": "Kernel Name", "op": "Op Name",
    "total_us_baseline": "Baseline total duration (us)", "total_us_candidate": "Candidate total duration (us)",
    "delta_us": "Change (us)", "delta_percent": "Change (%)",
    "occurrences_baseline": "Baseline occurrences", "occurrences_candidate": "Candidate occurrences",
    "status": "Status",
}


def write_comparison(comparison: Comparison, output: Path) -> WrittenComparison:
    """Write the comparison page, its JSON and its CSVs under `output/compare/`."""
    output = Path(output)
    _check_output(output)
    output.mkdir(parents=True, exist_ok=True)
    in_site = all(run.site.is_local_folder(output) and not run.site.temporary
                  for run in (comparison.baseline, comparison.candidate))
    stem = page_stem(comparison.baseline.name, comparison.candidate.name)
    assets = write_assets(output)
    writer = PageWriter(site_dir=output, assets=assets, folder=FOLDER)
    writer.write_csv(f"data/{stem}/tf_ops.csv", comparison.ops[list(OP_CSV_COLUMNS)].rename(columns=OP_CSV_COLUMNS))
    if comparison.kernels is not None:
        writer.write_csv(f"data/{stem}/kernels.csv",
                         comparison.kernels[list(KERNEL_CSV_COLUMNS)].rename(columns=KERNEL_CSV_COLUMNS))
    writer.write_json(f"{stem}.json", comparison.as_dict())
    writer.write_html(f"{stem}.html", "compare.html", **_page_context(comparison, stem, in_site))
    entries = _record(output, comparison, stem, in_site)
    updated = _write_index(output, assets, entries, in_site)
    return WrittenComparison(page=output / FOLDER / f"{stem}.html", json=output / FOLDER / f"{stem}.json",
                             in_site=in_site, index_updated=updated)


def _record(output: Path, comparison: Comparison, stem: str, in_site: bool) -> list[dict]:
    """Add (or replace) this comparison in the folder's manifest; returns every entry."""
    path = output / FOLDER / MANIFEST
    try:
        entries = json.loads(path.read_text(encoding="utf-8")).get("comparisons", [])
    except (OSError, ValueError, AttributeError, RecursionError):
        entries = []
    entry = {
        "baseline": comparison.baseline.name,
        "candidate": comparison.candidate.name,
        "page": f"{FOLDER}/{stem}.html",
        "in_site": in_site,
        "step_time_delta_percent": comparison.step_time.delta_percent,
        "significant": comparison.test.significant,
    }
    entries = [e for e in entries if e.get("page") != entry["page"]] + [entry]
    _atomic_write(path, json.dumps({"comparisons": entries}, indent=1))
    return entries


def _write_index(output: Path, assets: dict, entries: list[dict], in_site: bool) -> bool:
    """List the comparisons on the index page. In a site, only the comparisons of its own
    runs, in the "Comparisons" block of its index (nothing else of the page changes);
    False when that index has no such block. A folder of comparisons alone gets an
    index of its own."""
    root = PageWriter(site_dir=output, assets=assets)
    if not (output / SITE_SUMMARY).is_file():
        root.write_html("index.html", "compare_index.html", comparisons=_links(entries))
        return True
    if not in_site:
        return False
    block = _environment().get_template("compare_links.html").render(
        comparisons=_links([e for e in entries if e.get("in_site")]))
    return replace_index_block(output / "index.html", INDEX_BLOCK, block)


def replace_index_block(index: Path, marks: re.Pattern, block: str) -> bool:
    """Put `block` between the two marker elements `marks` matches in a site's index.html (only that part of the
    page changes, written atomically); False when the page cannot be read or lacks the markers (an older site)."""
    try:
        html = index.read_text(encoding="utf-8")
    except OSError:
        return False
    if not marks.search(html):
        return False
    _atomic_write(index, marks.sub(lambda m: m.group(1) + block + m.group(2), html, count=1))
    return True


def _links(entries: list[dict]) -> list[dict]:
    return [{**e, "href": "/".join(quote(p) for p in e["page"].split("/"))} for e in entries]


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


__all__ = ["WrittenComparison", "page_stem", "replace_index_block", "write_comparison"]
