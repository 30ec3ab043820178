"""Long tables ship their rows as data (output/table_cells.py: table_data), rendered a page at a time by
reportgen.js: the block is safe inside <script>, the pages stay light, and the CSVs keep every row."""

from __future__ import annotations

import csv
import json
import math
import re

from reportgen.output.table_cells import table_data
from tests.conftest import needs_shared
from tests.sharedsite import shared_site


def _block(markup: str) -> dict:
    match = re.fullmatch(r'<script type="application/json" id="t-rows">(.*)</script>', str(markup), re.S)
    assert match, markup
    return json.loads(match.group(1))


def test_capture_text_cannot_end_the_block_and_numbers_stay_parseable():
    hostile = "</script><script>alert(1)</script><!--&'"
    markup = str(table_data("t", [[1.0, hostile, math.nan, 1 / 3, 7.0]], ["int", "name", "us", "pct", "us"],
                            ["row-1"]))
    body = markup[len('<script type="application/json" id="t-rows">'):-len("</script>")]
    assert "<" not in body and ">" not in body and "&" not in body and "'" not in body
    data = _block(markup)
    # Text comes back whole; NaN is null (JSON.parse rejects NaN); counts are integers; 9 significant digits.
    assert data == {"block": "t-rows", "formats": ["int", "name", "us", "pct", "us"],
                    "rows": [[1, hostile, None, 0.333333333, 7]],
                    "ids": ["row-1"]}


@needs_shared
def test_the_longest_tables_have_no_rows_in_the_html_and_every_row_in_their_data_and_csv():
    run = shared_site() / "gpu_multi_worker"
    html = (run / "tf_stats.html").read_text(encoding="utf-8")
    assert len(html.encode()) <= 1 << 20
    assert "<tr id=\"tf-op-" not in html  # the rows are data, made by the page's script
    blocks = dict(re.findall(r'<script type="application/json" id="([^"]+)-rows">(.*?)</script>', html, re.S))
    with_idle = json.loads(blocks["ops-0-with"])
    with open(run / "data" / "tf_stats" / "framework_op_stats.csv", newline="", encoding="utf-8") as handle:
        csv_rows = list(csv.DictReader(handle))
    assert len(with_idle["rows"]) == len(csv_rows) > 500  # the CSV holds the table's rows, IDLE included
    assert with_idle["ids"][249] == "tf-op-250"
    assert re.search(r'<tbody data-rows="ops-0-with-rows"></tbody>', html)
    memory = (run / "memory_profile.html").read_text(encoding="utf-8")
    assert len(memory.encode()) <= 1 << 20


def test_units_follow_the_magnitude():
    from reportgen.output.formatting import duration_unit_us, fmt_bytes, fmt_duration_us, fmt_gflops, size_unit

    assert fmt_duration_us(155_546_431.463) == "155.55 s"
    assert [fmt_duration_us(v) for v in (0.25, 12.5, 40_000)] == ["250.00 ns", "12.50 µs", "40.00 ms"]
    assert fmt_bytes(512) == "512 B" and fmt_bytes(0.0005 * 2**20) == "524 B" and fmt_bytes(3 << 20) == "3.0 MiB"
    assert fmt_gflops(1500) == "1.50 TFLOP/s"
    # An axis takes the largest unit its top reaches: "600 s", not "640,000,000 µs"; "300 KiB", not "0.3 MiB".
    assert duration_unit_us(640e6) == ("s", 1e6) and duration_unit_us(40_000) == ("ms", 1e3)
    assert duration_unit_us(0.5) == ("ns", 1e-3) and duration_unit_us(0) == ("µs", 1.0)
    assert size_unit(300 * 1024) == ("KiB", 1024.0) and size_unit(14.4 * 2**30) == ("GiB", 2.0**30)
    assert size_unit(100) == ("B", 1.0) and size_unit(0) == ("B", 1.0)


@needs_shared
def test_shared_pages_speak_in_units_that_fit():
    site = shared_site()
    viewer = (site / "jax_mlp" / "memory_viewer.html").read_text(encoding="utf-8")
    assert "0.00 MiB" not in viewer and "0 B</div>" in viewer  # no padding, as bytes
    hlo = (site / "tpu_inference_2" / "hlo_stats.html").read_text(encoding="utf-8")
    assert "Total self time (s)" in hlo and "(µs)" not in hlo
    pods = (site / "gpu_multi_worker" / "pod_viewer.html").read_text(encoding="utf-8")
    assert "Step time (ms)" in pods and "Step time (µs)" not in pods
    # Numbers of six or more digits before the point in a time cell are gone ("155,546,431.463 µs").
    # Pie legends cut long op names in the middle, as the tables do.
    tf_stats = (site / "gpu_multi_worker" / "tf_stats.html").read_text(encoding="utf-8")
    pie = json.loads(re.search(r'id="pie-0-without-Host-op-spec">(.*?)</script>', tf_stats, re.S).group(1))
    assert "slice(datum.label, -23)" in pie["encoding"]["color"]["legend"]["labelExpr"]
    roofline = (site / "tpu_inference_2" / "roofline_model.html").read_text(encoding="utf-8")
    assert not re.search(r">\d{1,3}(,\d{3})+\.\d+<", roofline)
