"""Published output carries the captures' content and nothing else from the build machine."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.builtsite import (
    ENV_VALUE,
    PATH_MARKER,
    XSS_HOST,
    XSS_LINE,
    XSS_PLANE,
    XSS_RUN,
    built_site,
)
from tests.htmlscan import scan_html


@pytest.fixture(scope="module")
def built():
    return built_site()


def _output_files(built) -> list[Path]:
    files = [p for p in built.site.rglob("*") if p.is_file()]
    return [*files, built.single_file]


def test_build_reports_the_broken_host_by_its_site_name(built):
    assert built.exit_code == 2  # one host file is corrupt
    summary = json.loads((built.site / "summary.json").read_text(encoding="utf-8"))
    errors = summary["runs"][XSS_RUN]["errors"]
    assert [e["path"] for e in errors] == [f"{XSS_RUN}/broken.xplane.pb"]
    assert errors[0]["message"].startswith(f"{XSS_RUN}/broken.xplane.pb: ")


def test_no_local_path_or_environment_reaches_the_output(built):
    local = {str(built.root), os.path.realpath(built.root), str(built.logdir), PATH_MARKER}
    files = _output_files(built)
    assert len(files) > 8
    for file in files:
        data = file.read_bytes()
        for needle in local | {ENV_VALUE}:
            assert needle.encode() not in data, f"{needle!r} found in {file.relative_to(built.root)}"
        # The same text JSON-escaped ("/" may be written "\/").
        for needle in local:
            assert needle.replace("/", "\\/").encode() not in data


def _html_files(built) -> list[Path]:
    return [*sorted(built.site.rglob("*.html")), built.single_file]


def test_capture_strings_never_become_markup_or_code(built):
    raw_payloads = ("<script>alert(", "<img src=x", 'onmouseover="alert', "<!--")
    for file in _html_files(built):
        text = file.read_text(encoding="utf-8")
        for payload in raw_payloads:
            assert payload not in text, f"{payload!r} unescaped in {file.name}"
        scan = scan_html(text)
        assert not [a for a in scan.attributes if a[1].startswith("on")], f"event handler attribute in {file.name}"
        assert not [a for a in scan.attributes if a[0] == "img"]
        for attrs, content in scan.scripts:
            if "src" in attrs:
                assert not attrs["src"].startswith(("http:", "https:", "//")), "pages load nothing from elsewhere"
            elif attrs.get("type") == "application/json":
                json.loads(content)  # chart specs stay data
            else:
                # Code only in the single file, where the site's own scripts are inlined.
                assert file == built.single_file, f"inline code script in {file.name}"
                assert "alert(" not in content


def test_capture_strings_render_as_text(built):
    summary_page = scan_html((built.site / XSS_RUN / "index.html").read_text(encoding="utf-8"))
    for name in (XSS_RUN, XSS_HOST):
        assert name in "".join(summary_page.text)
    scan = scan_html((built.site / XSS_RUN / "inventory.html").read_text(encoding="utf-8"))
    text = "".join(scan.text)
    for name in (XSS_RUN, XSS_HOST, XSS_LINE):
        assert name in text
    # Quotes in attribute values stay inside the attribute.
    hosts = [value for tag, name, value in scan.attributes if name == "data-host"]
    assert hosts == [XSS_HOST]
    site_index = scan_html((built.site / "index.html").read_text(encoding="utf-8"))
    run_links = [value for tag, name, value in site_index.links if tag == "a" and "alert" in value]
    assert run_links and all("<" not in value and '"' not in value for value in run_links)
    assert XSS_RUN in "".join(site_index.text)
    single = "".join(scan_html(built.single_file.read_text(encoding="utf-8")).text)
    for name in (XSS_RUN, XSS_HOST, XSS_LINE):
        assert name in single
    # The CSV download holds the names verbatim (quoted the CSV way).
    csv = (built.site / XSS_RUN / "data" / "inventory" / "lines.csv").read_text(encoding="utf-8")
    assert XSS_PLANE.replace('"', '""') in csv
    assert XSS_LINE.replace('"', '""') in csv


FORMULAS = ("=", "+", "-", "@", "\t", "\r")


def test_csv_cells_a_spreadsheet_would_evaluate_are_quoted(tmp_path):
    """Host, line and op names that start like a formula (=, +, -, @) reach the CSVs as text: with a leading
    apostrophe (OWASP), while the pages show them unchanged and the comparison reads them back unchanged."""
    import csv
    import re

    from reportgen.compare.sources import BuiltSite
    from reportgen.loaders.proto import xplane_pb2
    from reportgen.pipeline.build import BuildOptions, build_site
    from tests.builtsite import SAMPLE_PROFILE

    space = xplane_pb2.XSpace.FromString((SAMPLE_PROFILE / "tf_keras_fast" / "vm.xplane.pb").read_bytes())
    prefixes = ['=HYPERLINK("http://x")', "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
                "@SUM(1+1)*cmd|' /C calc'!A0"]
    for plane in space.planes:
        for i, md in enumerate(plane.event_metadata.values()):
            md.name = prefixes[i % len(prefixes)] + md.name
        for line in plane.lines:
            line.name = line.display_name = "=" + (line.display_name or line.name)
    run = tmp_path / "logs" / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    (run / "=cmd.xplane.pb").write_bytes(space.SerializeToString())
    report = build_site([str(tmp_path / "logs")], BuildOptions(output=str(tmp_path / "site"), jobs=1, cache=False))
    assert report.exit_code == 0
    plain_number = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
    csvs = sorted((tmp_path / "site").rglob("*.csv"))
    quoted = 0
    for path in csvs:
        with open(path, newline="", encoding="utf-8") as handle:
            for row in csv.reader(handle):
                for cell in row:
                    assert not (cell.startswith(FORMULAS) and not plain_number.fullmatch(cell)), (path, cell)
                    quoted += cell.startswith(("'=", "'+", "'-", "'@"))
    assert len(csvs) >= 4 and quoted > 20
    page = (tmp_path / "site" / "run" / "inventory.html").read_text()  # the lines, by name
    assert ">=tf_Compute/" in page and "&#39;=tf_Compute" not in page
    lines = BuiltSite.open(str(tmp_path / "site")).run("run").table("inventory/lines.csv")
    assert lines["host"].tolist()[0] == "=cmd" and all(str(line).startswith("=") for line in lines["line"])


def test_long_names_are_stored_once_and_charts_show_them_shortened(tmp_path):
    """A 300 kB line name was copied into every busy slice of the activity charts (≈ 120 copies in the trace
    page); now each page holds it at most a few times, and chart labels are short and still distinct."""
    from reportgen.pipeline.build import BuildOptions, build_site
    from reportgen.sections.busy_chart import LABEL_LIMIT
    from tests.xspace import Space

    n = 300_000
    space = Space(("host",))
    line = space.host_plane().line(1, "L" * n)
    other = space.host_plane().line(2, "L" * n + "2")  # the same first 300 kB: their charts rows stay apart
    for i in range(8):
        line.event(f"E{i}" + "x" * 1000, i * 1_000_000, 500_000, step_num=i, _r=1)
        other.event("y", i * 1_000_000, 400_000)
    space.write(tmp_path / "logs" / "plugins" / "profile" / "run", "host")
    report = build_site([str(tmp_path / "logs")], BuildOptions(output=str(tmp_path / "site"), jobs=1, cache=False))
    assert report.exit_code == 0
    for page in ("index.html", "trace.html"):
        assert (tmp_path / "site" / "run" / page).stat().st_size < 5 * n, page
    page = (tmp_path / "site" / "run" / "trace.html").read_text()
    specs = [json.loads(text) for text in re.findall(r'<script type="application/json" id="[^"]*-spec">(.*?)</script>',
                                                     page, re.S)]
    labels = {row["label"] for spec in specs for data in spec.get("datasets", {}).values() for row in data
              if isinstance(row, dict) and "label" in row}
    assert len(labels) == 2 and all(len(label) <= LABEL_LIMIT for label in labels)


def test_a_host_stages_csv_writer_writes_what_pandas_writes():
    """`write_csv_columns` (the host stage's small tables, without a frame) gives the text of
    `neutralize_formulas(frame).to_csv(index=False)`: quoting, numbers, NaN, formula-like and multi-line text."""
    import io

    import numpy as np
    import pandas as pd

    from reportgen.output.site import neutralize_formulas, write_csv_columns

    rng = np.random.default_rng(7)
    texts = ["a", "=1+2", "-x", "+3", "@s", "'q", "a,b", 'say "hi"', "line\nbreak", "", "ünï", " sp", "\tt", "12",
             "-12.5", "x;y", "\r\nz"]
    for n in (0, 1, 2, 5, 40):
        columns = {
            "plane": np.array([texts[i] for i in rng.integers(0, len(texts), n)], dtype=object),
            "line_id": rng.integers(-2**62, 2**62, n),
            "line": np.array([texts[i] for i in rng.integers(0, len(texts), n)], dtype=object),
            "events": rng.integers(0, 10**6, n),
            "first_ms": np.where(rng.random(n) < 0.3, np.nan, rng.random(n) * 10.0 ** rng.integers(-8, 16, n)),
            "last_ms": rng.integers(0, 10**15, n) / 1e9,
        }
        written = io.StringIO(newline="")
        write_csv_columns(written, columns)
        assert written.getvalue() == neutralize_formulas(pd.DataFrame(columns)).to_csv(index=False), n
